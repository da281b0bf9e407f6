#include "server/transport/connection.h"

#include <chrono>
#include <string>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/core/http_reply.h"
#include "server/core/stream_types.h"
#include "server/status/event_log.h"
#include "server/transport/http_session.h"
#include "server/transport/reply_writer.h"

namespace kc::server {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
// From the connection to the end of the handshake; a client needs one round trip.
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
// For close_notify to go out and the client's to come back.
constexpr auto kCloseTimeout = std::chrono::seconds(5);

std::string PeerOf(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "";
  return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}

// A plain HTTP request on the HTTPS port: its header is read (within the
// handshake's deadline, already running), so closing leaves nothing unread
// and the client sees the answer, not a reset.
net::awaitable<void> RefusePlainHttp(PlainStream& stream, beast::flat_buffer& buffer) {
  http::request_parser<http::empty_body> parser;
  parser.body_limit(boost::none);
  auto [read_ec, read_bytes] = co_await http::async_read_header(stream, buffer, parser, kUseTuple);
  if (read_ec) co_return;  // not HTTP either
  HttpReply reply =
      EndingReply(RequestEnding::kRejected, "this server speaks HTTPS: use an https:// URL", "");
  auto writing = WriteReply(stream, std::move(reply), parser.get().version(), false);
  co_await std::move(writing);
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

net::awaitable<void> ServeTls(Routes& routes, PlainStream plain, net::ssl::context& tls,
                              std::string client) {
  auto handshake_failed = [&](const std::string& error) {
    routes.services.events.Emit(EventLevel::kWarning, "tls_handshake_failed",
                                {{"client", client}, {"error", error}});
  };
  beast::flat_buffer buffer;
  plain.expires_after(kHandshakeTimeout);
  // Beast reads just enough to tell a TLS ClientHello from anything else.
  auto [detect_ec, is_tls] = co_await beast::async_detect_ssl(plain, buffer, kUseTuple);
  if (detect_ec) {
    // A connection closed before its first byte is a port probe: not worth a line.
    if (detect_ec != net::error::eof || buffer.size() > 0) handshake_failed(detect_ec.message());
    co_return;
  }
  if (!is_tls) {
    handshake_failed("plain HTTP request on the HTTPS port");
    auto refusing = RefusePlainHttp(plain, buffer);
    co_await std::move(refusing);
    co_return;
  }
  TlsStream stream(std::move(plain), tls);
  auto [handshake_ec, used] =
      co_await stream.async_handshake(net::ssl::stream_base::server, buffer.data(), kUseTuple);
  if (handshake_ec) {
    handshake_failed(handshake_ec.message());
    co_return;
  }
  buffer.consume(used);
  auto serving = ServeRequests(routes, stream, buffer, client);  // named: see on_pool.h
  co_await std::move(serving);
  // close_notify tells the client the replies ended where they did (no truncation).
  TcpOf(stream).expires_after(kCloseTimeout);
  co_await stream.async_shutdown(kUseTuple);
}

}  // namespace

net::awaitable<void> ServeConnection(Routes& routes, tcp::socket socket, net::ssl::context* tls) {
  std::string client = PeerOf(socket);
  PlainStream stream(std::move(socket));
  if (tls != nullptr) {
    auto serving = ServeTls(routes, std::move(stream), *tls, std::move(client));
    co_await std::move(serving);
    co_return;
  }
  beast::flat_buffer buffer;
  auto serving = ServeRequests(routes, stream, buffer, std::move(client));
  co_await std::move(serving);
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

}  // namespace kc::server
