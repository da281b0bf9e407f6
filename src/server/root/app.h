// App: the server process put together (DESIGN.md "Processes"): the Beast
// front end on one I/O thread, a small thread pool for parsing, hashing and
// response building, the blob store, the worker pool and the event log; in a
// cluster, threads of their own for calls that wait on the cluster.
//
// It is the composition root (docs/server-wing.md): it owns every part, names them to the routes
// as Services, and builds the routes (routes.h) once the server is ready.
//
// Lifetime: Run() serves until SIGTERM/SIGINT, then stops accepting, answers
// 503 to new requests, lets running ones finish, and stops every worker.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>

#include "cluster/cluster_node.h"
#include "cluster/peer_client.h"
#include "pool/worker_pool.h"
#include "server/clustering/cluster_entry.h"
#include "server/clustering/peer_routes.h"
#include "server/core/server_config.h"
#include "server/core/services.h"
#include "server/execute/blob_routes.h"
#include "server/execute/build_cache_hooks.h"
#include "server/execute/execute_route.h"
#include "server/status/event_log.h"
#include "server/status/gpu_telemetry.h"
#include "server/status/metrics.h"
#include "server/status/request_ring.h"
#include "server/status/status_history.h"
#include "server/status/status_routes.h"
#include "server/tenancy/access_control.h"
#include "server/tenancy/tenant_quotas.h"
#include "server/transport/routes.h"
#include "store/blob_store.h"
#include "store/build_cache.h"

namespace kc::server {

class ClusterExecutor;

class App {
 public:
  explicit App(ServerConfig config);
  ~App();

  // Starts the workers and serves until a signal arrives. Returns the exit code.
  int Run();

 private:
  net::awaitable<void> Listen(net::ip::tcp::acceptor acceptor);
  // With --cluster: joins as node `<host>-<port>`, announcing this node's pool (docs/cluster.md).
  Status JoinCluster(int port);
  // This node's record in the cluster's registry: its URL, pool and load (no pool when it is
  // --cluster-entry-only).
  nlohmann::json DescribeNode(const std::string& url) const;
  nlohmann::json DescribePool() const;
  void BeginShutdown();
  // Run's steps. A start that fails says so in a server_start_failed event, on the console
  // where the event alone would be cut short or missed, and in the exit code (FailStart).
  struct StartFailure {
    int exit_code;
    std::string error;
    bool console = true;
  };
  int FailStart(const StartFailure& failure);
  std::optional<StartFailure> LoadSecurity();  // TLS, cluster peers, keys: fail closed
  std::optional<StartFailure> StartWorkers();
  std::variant<net::ip::tcp::acceptor, StartFailure> OpenListener();
  // The routes, on the parts as they now are (a cluster's node joined, or none).
  void BuildRoutes();
  void AnnounceStarted(int port);
  // Serves until a signal begins shutdown and nothing is in flight; then shuts down.
  int Serve(net::ip::tcp::acceptor acceptor);
  // SIGHUP: the keys file again; one that does not parse keeps the old keys, and says why.
  void ReloadKeys();
  // "https" with --tls-cert, else "http".
  std::string_view Scheme() const { return config_.tls ? "https" : "http"; }

  const ServerConfig config_;
  ServerState state_;
  EventLog events_;
  Metrics metrics_{events_};  // the pool's event sink: counts, then logs
  store::BlobStore blobs_;
  store::BuildCache build_cache_;
  BuildCacheHooks build_cache_hooks_{build_cache_};
  std::unique_ptr<pool::WorkerPool> pool_;
  RequestRing requests_;                         // the dashboard's last requests
  StatusHistory history_;                        // and its last hour
  std::unique_ptr<GpuTelemetry> gpu_telemetry_;  // GPU servers; made in Run()
  std::unique_ptr<AccessControl> access_ = std::make_unique<AccessControl>();  // open by default
  TenantQuotas quotas_{std::chrono::seconds(config_.quota_window_seconds)};
  std::unique_ptr<cluster::ClusterNode> cluster_;              // null: a single node
  std::unique_ptr<TenantQuotas::SharedLedger> cluster_usage_;  // with cluster_: quotas_' ledger
  std::unique_ptr<cluster::PeerClient> peers_;  // with cluster_: blobs to and from other nodes
  // Every HTTPS connection's context (--tls-cert); none: plain HTTP. Made in Run(), before the
  // first connection, and kept past io_, whose connections use it.
  std::optional<net::ssl::context> tls_;
  std::string node_url_;  // how the cluster's nodes reach this one
  net::io_context io_{1};
  net::thread_pool cpu_pool_;
  // With cluster_: the blocking calls to NATS and to other nodes (ClusterCall). Each waits on
  // the network, not a core, so there are more of them than cores.
  std::optional<net::thread_pool> cluster_calls_;
  std::optional<Services> services_;           // made once the workers start (StartWorkers)
  std::unique_ptr<ClusterExecutor> executor_;  // runs the cluster's requests for this node's pool
  // The routes (BuildRoutes); the cluster's entry before the route that uses it.
  std::unique_ptr<ClusterEntry> cluster_entry_;
  std::optional<ExecuteRoute> execute_;
  std::optional<BlobRoutes> blob_routes_;
  std::optional<PeerRoutes> peer_routes_;
  std::unique_ptr<StatusRoutes> status_;
  std::optional<Routes> routes_;
};

}  // namespace kc::server
