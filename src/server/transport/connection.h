// ServeConnection: one accepted connection, from its first byte to its close.
//
// Plain HTTP: the requests (http_session.h), then a half-close.
// HTTPS (`tls` set, --tls-cert): a TLS handshake under a deadline, so a
// client that connects and stays silent cannot hold the connection; then the
// same request code over the TLS stream; then close_notify, under a deadline
// too. A plain HTTP request on an HTTPS port is answered 400 in plain HTTP,
// saying so, instead of a bare reset. Failed handshakes are logged as
// `tls_handshake_failed` with OpenSSL's reason.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>

#include "server/transport/routes.h"

namespace kc::server {

net::awaitable<void> ServeConnection(Routes& routes, net::ip::tcp::socket socket,
                                     net::ssl::context* tls);

}  // namespace kc::server
