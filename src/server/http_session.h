// One HTTP connection: requests in sequence, as Beast's awaitable examples
// do. The session reads headers, streams the bodies of uploads into their
// consumers (body_reader.h), routes, and writes the replies; the routes
// themselves (App::Handle*) never touch the socket.
#pragma once

#include <boost/asio.hpp>

#include "server/app.h"

namespace kc::server {

net::awaitable<void> ServeConnection(App& app, net::ip::tcp::socket socket);

}  // namespace kc::server
