#include "server/body_reader.h"

#include <array>
#include <memory>
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

// Fills `chunk` from the socket, up to its capacity or the end of the body.
net::awaitable<boost::system::error_code> Fill(boost::beast::tcp_stream& stream,
                                               boost::beast::flat_buffer& buffer,
                                               http::request_parser<http::buffer_body>& parser,
                                               Chunk& chunk) {
  chunk.size = 0;
  while (!parser.is_done() && chunk.size < kChunkBytes) {
    auto& body = parser.get().body();
    body.data = chunk.data.get() + chunk.size;
    body.size = kChunkBytes - chunk.size;
    auto [ec, n] =
        co_await http::async_read(stream, buffer, parser, net::as_tuple(net::use_awaitable));
    chunk.size = kChunkBytes - body.size;
    if (ec == http::error::need_buffer) continue;
    if (ec) co_return ec;
  }
  co_return boost::system::error_code();
}

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
  std::array<Chunk, 2> chunks;
  Chunk* current = &chunks[0];
  Chunk* next = &chunks[1];
  if (auto ec = co_await Fill(stream, buffer, parser, *current)) co_return fail(ec);
  for (;;) {
    result.bytes += current->size;
    const bool last = parser.is_done();
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
    auto reading = Fill(stream, buffer, parser, *next);
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
