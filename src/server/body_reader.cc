#include "server/body_reader.h"

#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace kc::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

// Large enough that a pool hop per chunk costs nothing, small enough to stay
// in the L2/L3 caches between the socket copy and the hash and store.
constexpr size_t kChunkBytes = size_t{1} << 20;

struct Chunk {
  std::unique_ptr<char[]> data{new char[kChunkBytes]};
  size_t size = 0;
};

// Where the chunks come from. A body of known length is read straight from
// the socket into the chunk, a MiB per read when the client keeps up; only a
// chunked body goes through Beast's parser, whose reads (at most 64 KiB, and
// as small as the connection buffer's spare room) and extra copy would
// otherwise bound an upload at a few hundred MB/s.
class BodySource {
 public:
  BodySource(boost::beast::tcp_stream& stream, boost::beast::flat_buffer& buffer,
             http::request_parser<http::buffer_body>& parser)
      : stream_(stream), buffer_(buffer), parser_(parser) {
    if (!parser.chunked() && parser.content_length()) remaining_ = *parser.content_length();
    if (!parser.chunked() && !parser.content_length()) remaining_ = 0;  // no body
  }

  bool done() const { return remaining_ ? *remaining_ == 0 : parser_.is_done(); }

  // Fills `chunk` up to its capacity or the end of the body.
  net::awaitable<boost::system::error_code> Fill(Chunk& chunk) {
    chunk.size = 0;
    while (!done() && chunk.size < kChunkBytes) {
      Read read;
      if (remaining_) {
        auto reading = ReadDirect(chunk);  // named: see execute_route.cc
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
        static_cast<size_t>(std::min<uint64_t>(kChunkBytes - chunk.size, *remaining_));
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
    body.size = kChunkBytes - chunk.size;
    auto [ec, ignored] =
        co_await http::async_read(stream_, buffer_, parser_, net::as_tuple(net::use_awaitable));
    if (ec == http::error::need_buffer) ec = {};
    co_return Read{ec, kChunkBytes - chunk.size - body.size};
  }

  boost::beast::tcp_stream& stream_;
  boost::beast::flat_buffer& buffer_;
  http::request_parser<http::buffer_body>& parser_;
  std::optional<uint64_t> remaining_;  // known length: bytes still to read
};

}  // namespace

net::awaitable<BodyResult> ReadBody(boost::beast::tcp_stream& stream,
                                    boost::beast::flat_buffer& buffer,
                                    http::request_parser<http::buffer_body>& parser,
                                    BodyConsumer* consumer, net::thread_pool& pool) {
  BodyResult result;
  auto fail = [&](boost::system::error_code ec) {
    result.end = ec == http::error::body_limit ? BodyEnd::kTooLarge : BodyEnd::kBroken;
    return result;
  };
  // Hash and store the last Take's pieces, at once.
  auto stages = [&]() -> net::awaitable<Status> {
    auto hash = [&]() -> net::awaitable<void> {
      consumer->HashTaken();
      co_return;
    };
    auto store = [&]() -> net::awaitable<Status> { co_return consumer->StoreTaken(); };
    auto hashing = net::co_spawn(pool, hash, net::use_awaitable);  // named: see execute_route.cc
    auto storing = net::co_spawn(pool, store, net::use_awaitable);
    co_return co_await (std::move(hashing) && std::move(storing));
  };
  BodySource source(stream, buffer, parser);
  std::array<Chunk, 2> chunks;
  Chunk* current = &chunks[0];
  Chunk* next = &chunks[1];
  if (auto ec = co_await source.Fill(*current)) co_return fail(ec);
  for (;;) {
    result.bytes += current->size;
    const bool last = source.done();
    bool taken = false;
    if (consumer != nullptr && result.consumer.ok() && current->size > 0) {
      std::string_view view(current->data.get(), current->size);
      auto take = [&]() -> net::awaitable<Status> { co_return consumer->Take(view); };
      auto taking = net::co_spawn(pool, take, net::use_awaitable);
      result.consumer = co_await std::move(taking);
      taken = result.consumer.ok();
    }
    if (last) {
      if (taken) result.consumer = co_await stages();
      co_return result;
    }
    // This chunk is hashed and stored while the next one arrives; after an
    // error the rest is only read.
    boost::system::error_code read_ec;
    auto reading = source.Fill(*next);
    if (taken) {
      auto staging = stages();
      std::tie(result.consumer, read_ec) = co_await (std::move(staging) && std::move(reading));
    } else {
      read_ec = co_await std::move(reading);
    }
    if (read_ec) co_return fail(read_ec);
    std::swap(current, next);
  }
}

}  // namespace kc::server
