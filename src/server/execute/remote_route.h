// RemoteRoute: where an admitted /execute request runs when this node is one of a cluster's
// (the cluster glue's ClusterEntry is the one there is). The execute route knows it by this
// face only, so the cluster glue sits above the execute room, never beside it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <boost/asio.hpp>

#include "pool/cancel_flag.h"
#include "server/core/http_reply.h"
#include "server/execute/admitted_request.h"

namespace kc::server {

class RemoteRoute {
 public:
  virtual ~RemoteRoute() = default;
  // The reply to an admitted request, from wherever it ran. With an Idempotency-Key, a retry
  // on any node gets the first run's outcome.
  virtual boost::asio::awaitable<HttpReply> Route(std::shared_ptr<AdmittedRequest> admitted,
                                                  std::string request_id,
                                                  std::optional<std::string> idempotency_key,
                                                  std::shared_ptr<pool::CancelFlag> cancel) = 0;
};

}  // namespace kc::server
