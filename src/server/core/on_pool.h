// OnPool: runs a plain call on a thread pool's threads and resumes the awaiting coroutine with
// its result, so the event loop serves other connections meanwhile.
#pragma once

#include <type_traits>
#include <utility>

#include <boost/asio.hpp>

namespace kc::server {

template <class Pool, class Call>
boost::asio::awaitable<std::invoke_result_t<Call&>> OnPool(Pool& pool, Call call) {
  namespace net = boost::asio;
  using Result = std::invoke_result_t<Call&>;
  auto run = [call = std::move(call)]() mutable -> net::awaitable<Result> { co_return call(); };
  // GCC 12 destroys temporaries inside a co_await expression twice, so every awaitable with
  // state is built into a named variable first.
  auto running = net::co_spawn(pool, std::move(run), net::use_awaitable);
  co_return co_await std::move(running);
}

}  // namespace kc::server
