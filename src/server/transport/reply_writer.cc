#include "server/transport/reply_writer.h"

#include <string>
#include <utility>
#include <vector>

#include <boost/beast/http.hpp>

#include "server/core/stream_types.h"

namespace kc::server {

namespace net = boost::asio;
namespace http = boost::beast::http;

namespace {

constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

template <class Body>
void SetHead(http::response<Body>& response, const HttpReply& reply, bool keep_alive) {
  response.set(http::field::server, "kcoral");
  response.set(http::field::content_type, reply.content_type);
  if (!reply.request_id.empty()) response.set("X-Request-ID", reply.request_id);
  if (reply.retry_after) response.set(http::field::retry_after, "1");
  if (reply.server_ms) {
    // The standard way to show the server's share of a request's time.
    response.set("Server-Timing", "total;dur=" + std::to_string(*reply.server_ms));
  }
  for (const auto& [name, value] : reply.headers)
    response.set(name, value);
  response.keep_alive(keep_alive);
}

}  // namespace

template <class Stream>
net::awaitable<boost::system::error_code> WriteReply(Stream& stream, HttpReply reply,
                                                     unsigned version, bool keep_alive) {
  const auto status = static_cast<http::status>(reply.status);
  if (reply.pieces == nullptr) {
    http::response<http::string_body> response{status, version};
    SetHead(response, reply, keep_alive);
    response.body() = std::move(reply.body);
    response.prepare_payload();
    auto [ec, n] = co_await http::async_write(stream, response, kUseTuple);
    co_return ec;
  }
  http::response<http::empty_body> head{status, version};
  SetHead(head, reply, keep_alive);
  head.content_length(reply.body_size());
  http::response_serializer<http::empty_body> serializer{head};
  auto [head_ec, head_n] = co_await http::async_write_header(stream, serializer, kUseTuple);
  if (head_ec) co_return head_ec;
  std::vector<net::const_buffer> buffers;
  for (std::string_view piece : reply.pieces->encoded.pieces)
    buffers.emplace_back(piece.data(), piece.size());
  auto [ec, n] = co_await net::async_write(stream, buffers, kUseTuple);
  co_return ec;
}

template net::awaitable<boost::system::error_code> WriteReply(PlainStream&, HttpReply, unsigned,
                                                              bool);
template net::awaitable<boost::system::error_code> WriteReply(TlsStream&, HttpReply, unsigned,
                                                              bool);

}  // namespace kc::server
