// PeerRoutes: GET /cluster/blobs/<sha256> and POST /cluster/blobs (docs/cluster.md "Blobs never
// cross the broker"): how the nodes of a cluster hand each other blobs and results. Only a
// request signed with the cluster's secret gets anything (cluster/peer_auth.h); a server
// outside a cluster answers 404 as for any unknown route.
#pragma once

#include <string>
#include <string_view>

#include <boost/asio.hpp>

#include "server/core/http_reply.h"
#include "server/core/services.h"
#include "store/blob.h"

namespace kc::server {

class PeerRoutes {
 public:
  explicit PeerRoutes(Services& services) : services_(services) {}

  net::awaitable<HttpReply> Fetch(std::string peer_header, std::string target);
  HttpReply Push(std::string_view peer_header, StatusOr<store::BlobPtr> blob);
  // Whether a request on a cluster route is signed with the cluster's secret (checked before
  // a pushed body is read, and again by the route).
  Status CheckPeer(std::string_view peer_header, std::string_view method,
                   std::string_view target) const;

 private:
  Services& services_;
};

}  // namespace kc::server
