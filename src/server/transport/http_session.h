// The requests of one connection, in sequence, as Beast's awaitable examples
// do. The session reads headers, streams the bodies of uploads into their
// consumers (body_reader.h), routes, and writes the replies; the routes
// themselves (routes.h) never touch the socket. How the connection
// starts and ends (TLS handshake, close) is connection.h's.
#pragma once

#include <string>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>

#include "server/transport/routes.h"

namespace kc::server {

// Serves requests until the client closes the connection, a timeout or an
// error ends it, or a reply must close it. `buffer` may already hold the
// start of the first request. `client` is the peer's "address:port", for the
// log. Stream: PlainStream or TlsStream (stream_types.h).
template <class Stream>
net::awaitable<void> ServeRequests(Routes& routes, Stream& stream,
                                   boost::beast::flat_buffer& buffer, std::string client);

}  // namespace kc::server
