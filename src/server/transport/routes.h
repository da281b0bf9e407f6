// Routes: what a connection's requests are dispatched to (http_session.h), each concern in a
// room of its own, on the Services they share. App builds them once the server is ready.
#pragma once

#include "server/clustering/peer_routes.h"
#include "server/core/services.h"
#include "server/execute/blob_routes.h"
#include "server/execute/execute_route.h"
#include "server/status/status_routes.h"

namespace kc::server {

struct Routes {
  Services& services;
  ExecuteRoute& execute;
  BlobRoutes& blobs;
  PeerRoutes& peers;
  StatusRoutes& status;
};

}  // namespace kc::server
