// ExecuteRoute: POST /execute (spec/server.md §2.2). Parse and resolve blobs off the event
// loop, answer CACHE_MISS or 400 early, queue the program for a seat (or, in a cluster, for
// the cluster: remote_route.h), then build the outcome reply off the event loop too.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/http.hpp>

#include "base/clock.h"
#include "pool/cancel_flag.h"
#include "protocol/program.h"
#include "server/core/http_reply.h"
#include "server/core/services.h"
#include "server/execute/admitted_request.h"
#include "server/execute/execute_ingest.h"
#include "server/execute/remote_route.h"
#include "server/tenancy/access_control.h"
#include "server/tenancy/tenant_limits.h"

namespace kc::server {

namespace http = boost::beast::http;

// Every X-Request-ID value the request carries (spec/protocol.md §1.5).
std::vector<std::string_view> SuppliedRequestIds(const http::fields& fields);

// An /execute request whose body has been read.
struct ExecuteArrival {
  std::string request_id;
  std::string client;
  Clock::time_point received;  // when its header was in
  size_t body_bytes = 0;
  // Idempotency-Key: in a cluster, a retry with it on any node gets the first run's outcome.
  std::optional<std::string> idempotency_key;
  std::optional<Caller> caller;  // with --auth-keys: the key's tenant and role
};

class ExecuteRoute {
 public:
  // `cluster`: this node's entry into its cluster (clustering/cluster_entry.h); null on a
  // single node, which runs every request on its own seats.
  ExecuteRoute(Services& services, RemoteRoute* cluster) : services_(services), cluster_(cluster) {}

  // `body` is the ingested body, or why it was refused. `cancel` is raised if the client
  // hangs up while the program waits or runs.
  net::awaitable<HttpReply> Handle(ExecuteArrival arrival,
                                   StatusOr<std::unique_ptr<ExecuteIngest>> body,
                                   std::shared_ptr<pool::CancelFlag> cancel);

  // Everything before the queue, on the parse pool: the 400, 403 or CACHE_MISS to answer, or
  // the request admitted.
  std::variant<HttpReply, AdmittedRequest> Screen(StatusOr<std::unique_ptr<ExecuteIngest>> body,
                                                  const std::string& request_id,
                                                  const std::string& tenant,
                                                  const TenantLimits& limits);
  // Why this server refuses the program's options (GPUs it cannot have), if it does.
  std::optional<HttpReply> RefuseOptions(const protocol::ProgramOptions& options,
                                         const std::string& tenant,
                                         std::optional<int64_t> allowed_gpus,
                                         const std::string& request_id) const;

 private:
  // What is refused before the body is looked at: a server shutting down, a body over the
  // tenant's own limit.
  std::optional<HttpReply> RefuseUnread(const ExecuteArrival& arrival, const std::string& tenant,
                                        const TenantLimits& limits) const;
  // Counts the request against its tenant's quotas, or the 429 to answer; on success the
  // caller must Leave once it is answered.
  net::awaitable<std::optional<HttpReply>> EnterQuotas(std::string tenant, TenantLimits limits,
                                                       std::string request_id);
  // Runs an admitted request on one of this server's seats.
  net::awaitable<HttpReply> RunHere(std::shared_ptr<AdmittedRequest> admitted,
                                    std::string request_id,
                                    std::shared_ptr<pool::CancelFlag> cancel);
  // The request_finished event and the counts of an /execute reply; returns it with its time.
  HttpReply Finish(HttpReply reply, const std::string& request_id, const std::string& tenant,
                   Clock::time_point received);

  Services& services_;
  RemoteRoute* const cluster_;
};

}  // namespace kc::server
