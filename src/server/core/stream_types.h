// The two streams a connection's requests run on: plain TCP, or TLS over TCP
// (--tls-cert; issue 27). The request code (http_session.cc, body_reader.cc)
// is written once, as templates on the stream, and instantiated for both in
// its .cc file; what differs, the handshake and the close, is connection.cc's.
#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>

namespace kc::server {

using PlainStream = boost::beast::tcp_stream;
using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

// The TCP stream under either: its timeouts, its socket.
inline PlainStream& TcpOf(PlainStream& stream) {
  return stream;
}
inline PlainStream& TcpOf(TlsStream& stream) {
  return stream.next_layer();
}

}  // namespace kc::server
