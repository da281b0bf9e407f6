#include "server/core/body_reader.h"

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "server/core/stream_types.h"

namespace kc::server {

namespace net = boost::asio;
namespace http = boost::beast::http;

namespace {

// Few hops between threads (each wakes one, costly in a VM), small enough to
// stay in the L2/L3 caches between the socket copy and the hash and store. A
// 256 MiB upload on 2 cores: 226 ms with 4 MiB chunks, 258 ms with 1 MiB
// (medians of 40 rounds taking turns; other runs: 249 vs 269, 255 vs 258).
constexpr size_t kChunkBytes = size_t{4} << 20;

// Allocated when first filled, no larger than what is left of the body, so a
// small request costs a small buffer.
struct Chunk {
  std::unique_ptr<char[]> data;
  size_t capacity = 0;
  size_t size = 0;
};

// Where the chunks come from. A body of known length is read straight from
// the socket into the chunk, a MiB per read when the client keeps up; only a
// chunked body goes through Beast's parser, whose reads (at most 64 KiB, and
// as small as the connection buffer's spare room) and extra copy would
// otherwise bound an upload at a few hundred MB/s. Over TLS the same reads
// decrypt into the chunk, one TLS record (16 KiB at most) per read: the
// bytes the header read brought along are plaintext already, in `buffer`.
template <class Stream>
class BodySource {
 public:
  BodySource(Stream& stream, boost::beast::flat_buffer& buffer,
             http::request_parser<http::buffer_body>& parser)
      : stream_(stream), buffer_(buffer), parser_(parser) {
    if (!parser.chunked() && parser.content_length()) remaining_ = *parser.content_length();
    if (!parser.chunked() && !parser.content_length()) remaining_ = 0;  // no body
  }

  bool done() const { return remaining_ ? *remaining_ == 0 : parser_.is_done(); }

  // Fills `chunk` up to its capacity or the end of the body.
  net::awaitable<boost::system::error_code> Fill(Chunk& chunk) {
    chunk.size = 0;
    if (chunk.data == nullptr) {
      chunk.capacity = remaining_
                           ? static_cast<size_t>(std::min<uint64_t>(kChunkBytes, *remaining_))
                           : kChunkBytes;
      chunk.data.reset(new char[chunk.capacity]);
    }
    while (!done() && chunk.size < chunk.capacity) {
      Read read;
      if (remaining_) {
        auto reading = ReadDirect(chunk);  // named: see on_pool.h
        read = co_await std::move(reading);
      } else {
        auto reading = ReadParsed(chunk);
        read = co_await std::move(reading);
      }
      if (auto ec = std::get<0>(read)) co_return ec;
      chunk.size += std::get<1>(read);
    }
    co_return boost::system::error_code();
  }

 private:
  using Read = std::tuple<boost::system::error_code, size_t>;

  net::awaitable<Read> ReadDirect(Chunk& chunk) {
    char* to = chunk.data.get() + chunk.size;
    const size_t room =
        static_cast<size_t>(std::min<uint64_t>(chunk.capacity - chunk.size, *remaining_));
    size_t n = 0;
    boost::system::error_code ec;
    if (buffer_.size() > 0) {  // read with the header
      n = std::min(room, buffer_.size());
      std::memcpy(to, buffer_.data().data(), n);
      buffer_.consume(n);
    } else {
      std::tie(ec, n) = co_await stream_.async_read_some(net::buffer(to, room),
                                                         net::as_tuple(net::use_awaitable));
    }
    *remaining_ -= n;
    co_return Read{ec, n};
  }

  net::awaitable<Read> ReadParsed(Chunk& chunk) {
    auto& body = parser_.get().body();
    body.data = chunk.data.get() + chunk.size;
    body.size = chunk.capacity - chunk.size;
    auto [ec, ignored] =
        co_await http::async_read(stream_, buffer_, parser_, net::as_tuple(net::use_awaitable));
    if (ec == http::error::need_buffer) ec = {};
    co_return Read{ec, chunk.capacity - chunk.size - body.size};
  }

  Stream& stream_;
  boost::beast::flat_buffer& buffer_;
  http::request_parser<http::buffer_body>& parser_;
  std::optional<uint64_t> remaining_;  // known length: bytes still to read
};

// The stages of the chunks in flight: Take and Hash on one strand, Store on
// another; a slot is free again once both of its stages have run.
class ChunkStages {
 public:
  ChunkStages(BodyConsumer& consumer, net::thread_pool& pool, net::any_io_executor io)
      : consumer_(consumer),
        hash_(net::make_strand(pool.get_executor())),
        store_(net::make_strand(pool.get_executor())),
        io_(io),
        wake_(io) {}

  // On the reader's executor, as are WaitFree and the stages' Done.
  void Submit(int slot, std::string_view chunk) {
    pending_[slot] = 2;
    net::post(hash_, [this, slot, chunk] {
      Status taken = failed() ? Status::Ok() : consumer_.Take(slot, chunk);
      if (!taken.ok()) Fail(taken);
      net::post(store_, [this, slot] {
        if (!failed()) {
          if (Status stored = consumer_.StoreTaken(slot); !stored.ok()) Fail(stored);
        }
        Done(slot);
      });
      if (!failed()) consumer_.HashTaken(slot);
      Done(slot);
    });
  }

  // Waits until `slot` is free (every slot, for -1).
  net::awaitable<void> WaitFree(int slot) {
    while (Busy(slot)) {
      wake_.expires_at(net::steady_timer::time_point::max());
      co_await wake_.async_wait(net::as_tuple(net::use_awaitable));
    }
  }

  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return !status_.ok();
  }
  void Fail(const Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = status;
  }
  bool Busy(int slot) const {
    if (slot >= 0) return pending_[slot] > 0;
    for (int pending : pending_) {
      if (pending > 0) return true;
    }
    return false;
  }
  // A stage's last act: the count drops on the reader's executor, so the
  // reader can only see a slot free (and end, destroying this) once no stage
  // touches it any more.
  void Done(int slot) {
    net::post(io_, [this, slot] {
      --pending_[slot];
      wake_.cancel();  // the reader looks again
    });
  }

  BodyConsumer& consumer_;
  net::strand<net::thread_pool::executor_type> hash_, store_;
  net::any_io_executor io_;
  net::steady_timer wake_;                           // on the reader's executor
  std::array<int, BodyConsumer::kSlots> pending_{};  // stages left per slot; reader's executor only
  std::mutex mu_;
  Status status_ = Status::Ok();  // the first error; guarded by mu_
};

}  // namespace

template <class Stream>
net::awaitable<BodyResult> ReadBody(Stream& stream, boost::beast::flat_buffer& buffer,
                                    http::request_parser<http::buffer_body>& parser,
                                    BodyConsumer* consumer, net::thread_pool& pool) {
  BodyResult result;
  BodySource<Stream> source(stream, buffer, parser);
  std::array<Chunk, BodyConsumer::kSlots> chunks;
  std::optional<ChunkStages> stages;
  if (consumer != nullptr) stages.emplace(*consumer, pool, stream.get_executor());
  boost::system::error_code read_ec;
  for (int k = 0; !source.done(); k = (k + 1) % BodyConsumer::kSlots) {
    if (stages) {
      auto freeing = stages->WaitFree(k);  // named: see on_pool.h
      co_await std::move(freeing);
    }
    auto filling = source.Fill(chunks[k]);
    if ((read_ec = co_await std::move(filling))) break;
    result.bytes += chunks[k].size;
    if (stages && chunks[k].size > 0 && stages->status().ok()) {
      stages->Submit(k, std::string_view(chunks[k].data.get(), chunks[k].size));
    }
  }
  // Nothing may outlive the chunks: every stage finishes, even on a broken connection.
  if (stages) {
    auto draining = stages->WaitFree(-1);
    co_await std::move(draining);
    result.consumer = stages->status();
  }
  if (read_ec)
    result.end = read_ec == http::error::body_limit ? BodyEnd::kTooLarge : BodyEnd::kBroken;
  co_return result;
}

template net::awaitable<BodyResult> ReadBody(PlainStream&, boost::beast::flat_buffer&,
                                             http::request_parser<http::buffer_body>&,
                                             BodyConsumer*, net::thread_pool&);
template net::awaitable<BodyResult> ReadBody(TlsStream&, boost::beast::flat_buffer&,
                                             http::request_parser<http::buffer_body>&,
                                             BodyConsumer*, net::thread_pool&);

}  // namespace kc::server
