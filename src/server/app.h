// App: the server process put together (DESIGN.md "Processes"): the Beast
// front end on one I/O thread, a small thread pool for parsing, hashing and
// response building, the blob store, the worker pool and the event log; in a
// cluster, threads of their own for calls that wait on the cluster.
//
// Lifetime: Run() serves until SIGTERM/SIGINT, then stops accepting, answers
// 503 to new requests, lets running ones finish, and stops every worker.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <variant>

#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http.hpp>

#include "base/clock.h"
#include "cluster/cluster_node.h"
#include "cluster/peer_client.h"
#include "cluster/work_message.h"
#include "pool/worker_pool.h"
#include "server/access_control.h"
#include "server/admitted_request.h"
#include "server/build_cache_hooks.h"
#include "server/event_log.h"
#include "server/execute_ingest.h"
#include "server/gpu_telemetry.h"
#include "server/http_reply.h"
#include "server/metrics.h"
#include "server/on_pool.h"
#include "server/request_ring.h"
#include "server/server_config.h"
#include "server/services.h"
#include "server/status_board.h"
#include "server/status_history.h"
#include "server/status_streams.h"
#include "server/tenant_quotas.h"
#include "store/blob_store.h"
#include "store/build_cache.h"

namespace kc::server {

namespace net = boost::asio;
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

class ClusterExecutor;

class App {
 public:
  explicit App(ServerConfig config);
  ~App();

  // Starts the workers and serves until a signal arrives. Returns the exit code.
  int Run();

  // Routes (routes never touch the socket: http_session.cc reads the bodies).
  // `body` is the ingested body, or why it was refused. `cancel` is raised
  // if the client hangs up while the program waits or runs.
  net::awaitable<HttpReply> HandleExecute(ExecuteArrival arrival,
                                          StatusOr<std::unique_ptr<ExecuteIngest>> body,
                                          std::shared_ptr<pool::CancelFlag> cancel);
  // POST /blobs and HEAD /blobs/<sha256> (blob_routes.cc).
  HttpReply HandleBlobUpload(StatusOr<store::BlobPtr> blob, const std::string& request_id,
                             const std::string& client, Clock::time_point received);
  HttpReply HandleBlobLookup(std::string_view sha256);
  // GET /cluster/blobs/<sha256> and POST /cluster/blobs: between the nodes of a cluster only,
  // signed with its secret (cluster/peer_auth.h; cluster_routes.cc).
  net::awaitable<HttpReply> HandlePeerBlobFetch(std::string peer_header, std::string target);
  HttpReply HandlePeerBlobPush(std::string_view peer_header, StatusOr<store::BlobPtr> blob);
  // Whether a request on a cluster route is signed with the cluster's secret (checked before
  // a pushed body is read, and again by the route).
  Status CheckPeer(std::string_view peer_header, std::string_view method,
                   std::string_view target) const;
  HttpReply HandleHealth() const;
  HttpReply HandleMetrics() const;
  // GET /usage: the caller's usage and remaining budget; an operator's key gets every tenant's.
  net::awaitable<HttpReply> HandleUsage(std::optional<Caller> caller);
  // GET /dashboard and its script and style (open), GET /api/status (a key, when there are
  // keys): the live dashboard of issue 28 (dashboard_routes.cc).
  HttpReply HandleDashboard(std::string_view target) const;
  net::awaitable<HttpReply> HandleStatus(std::optional<Caller> caller);
  // GET /api/status/stream: takes the connection (nullopt), or the reply when it cannot.
  std::optional<HttpReply> StreamStatus(net::ip::tcp::socket& socket, std::optional<Caller> caller,
                                        bool gzip);
  HttpReply RequestTooLarge(const std::string& request_id, uint64_t declared);
  // The keys check of a route (access_control.h): who calls (nobody without keys), or the
  // 401/403/429 to answer.
  struct Admission {
    std::optional<Caller> caller;
    std::optional<HttpReply> refusal;
  };
  Admission Admit(Access needed, std::string_view authorization, std::string_view client);

  const ServerConfig& config() const { return config_; }
  EventLog& events() { return events_; }
  // Parsing, hashing and response building run here, off the event loop.
  net::thread_pool& cpu_pool() { return cpu_pool_; }

 private:
  net::awaitable<void> Listen(net::ip::tcp::acceptor acceptor);
  // Runs an admitted request on one of this server's seats.
  net::awaitable<HttpReply> RunHere(std::shared_ptr<AdmittedRequest> admitted,
                                    std::string request_id,
                                    std::shared_ptr<pool::CancelFlag> cancel);
  // In a cluster: queues it for the pool that can run it and answers with the first stored
  // outcome (cluster_entry.cc), in steps: queue (retried while NATS is away), claim a client's
  // key beside the message, await the outcome, answer from its record.
  net::awaitable<HttpReply> RouteThroughCluster(std::shared_ptr<AdmittedRequest> admitted,
                                                std::string request_id,
                                                std::optional<std::string> idempotency_key,
                                                std::shared_ptr<pool::CancelFlag> cancel);
  struct ClusterRoute;
  struct ClusterQueued;
  struct ClusterClaim;
  net::awaitable<ClusterQueued> QueueInCluster(std::shared_ptr<ClusterRoute> route);
  net::awaitable<StatusOr<ClusterClaim>> ClaimAndQueue(ClusterRoute& route,
                                                       cluster::WorkMessage& work,
                                                       const std::string& pool,
                                                       const std::string& tenant);
  net::awaitable<std::optional<HttpReply>> AwaitClusterOutcome(
      std::shared_ptr<ClusterRoute> route, std::shared_ptr<pool::CancelFlag> cancel);
  net::awaitable<HttpReply> AnswerFromOutcome(std::string record_text, std::string request_id);
  // Everything before the queue, on the parse pool: the 400, 403 or CACHE_MISS to answer, or
  // the request admitted (execute_route.cc).
  std::variant<HttpReply, AdmittedRequest> Screen(StatusOr<std::unique_ptr<ExecuteIngest>> body,
                                                  const std::string& request_id,
                                                  const std::string& tenant,
                                                  const TenantLimits& limits);
  // Why this server refuses the program's options (GPUs it cannot have), if it does.
  std::optional<HttpReply> RefuseOptions(const protocol::ProgramOptions& options,
                                         const std::string& tenant,
                                         std::optional<int64_t> allowed_gpus,
                                         const std::string& request_id) const;
  // The request_finished event and the counts of an /execute reply; returns it with its time.
  HttpReply FinishExecute(HttpReply reply, const std::string& request_id, const std::string& tenant,
                          Clock::time_point received);
  // Whether a client retried request `key` on some node after `since` (an "attach" message).
  bool AttachedSince(const std::string& key, std::chrono::steady_clock::time_point since);
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
  void AnnounceStarted(int port);
  // Serves until a signal begins shutdown and nothing is in flight; then shuts down.
  int Serve(net::ip::tcp::acceptor acceptor);
  // SIGHUP: the keys file again; one that does not parse keeps the old keys, and says why.
  void ReloadKeys();
  // The dashboard's status, whole (status_board.h cuts it per viewer).
  StatusBoard::Snapshot BuildStatus() const;
  // A finished request, for /metrics and the dashboard's history (and its ring, when
  // `record` is given: an /execute request).
  void CountFinished(const HttpReply& reply, double total_ms, const RequestRecord* record);
  // The GPUs' lease and timing-span totals, for the history's GPU-time charts.
  void SampleGpuTime(const pool::PoolLoad& load, int64_t unix_ms) const;
  // Runs `call`, which may wait on the cluster (a NATS round trip through a leader election,
  // a dead node's connect timeout), on the cluster-calls threads, so that neither the event
  // loop nor the parse pool waits with it. On a single node, at once: it waits on nothing.
  template <class Call>
  net::awaitable<std::invoke_result_t<Call&>> ClusterCall(Call call) {
    if (!cluster_calls_) co_return call();
    auto running = OnPool(*cluster_calls_, std::move(call));  // named: see on_pool.h
    co_return co_await std::move(running);
  }
  // "https" with --tls-cert, else "http".
  std::string_view Scheme() const { return config_.tls ? "https" : "http"; }

  const ServerConfig config_;
  EventLog events_;
  Metrics metrics_{events_};  // the pool's event sink: counts, then logs
  store::BlobStore blobs_;
  store::BuildCache build_cache_;
  BuildCacheHooks build_cache_hooks_{build_cache_};
  std::unique_ptr<pool::WorkerPool> pool_;
  RequestRing requests_;           // the dashboard's last requests
  mutable StatusHistory history_;  // and its last hour (GPU time sampled by const readers too)
  std::unique_ptr<GpuTelemetry> gpu_telemetry_;  // GPU servers; made in Run()
  StatusBoard status_board_{[this] { return BuildStatus(); }};
  std::unique_ptr<StatusStreams> status_streams_;  // made in Run(), ended before the pool
  std::unique_ptr<AccessControl> access_ = std::make_unique<AccessControl>();  // open by default
  TenantQuotas quotas_{std::chrono::seconds(config_.quota_window_seconds)};
  std::unique_ptr<cluster::ClusterNode> cluster_;              // null: a single node
  std::unique_ptr<TenantQuotas::SharedLedger> cluster_usage_;  // with cluster_: quotas_' ledger
  std::unique_ptr<cluster::PeerClient> peers_;  // with cluster_: blobs to and from other nodes
  // Every HTTPS connection's context (--tls-cert); none: plain HTTP. Made in Run(), before the
  // first connection, and kept past io_, whose connections use it.
  std::optional<net::ssl::context> tls_;
  std::string node_url_;  // how the cluster's nodes reach this one
  std::unique_ptr<cluster::Listening> hear_attach_;
  std::mutex attached_mu_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> attached_;  // attached_mu_
  std::optional<Services> services_;           // made once the workers start (StartWorkers)
  std::unique_ptr<ClusterExecutor> executor_;  // runs the cluster's requests for this node's pool
  net::io_context io_{1};
  net::thread_pool cpu_pool_;
  // With cluster_: the blocking calls to NATS and to other nodes (ClusterCall). Each waits on
  // the network, not a core, so there are more of them than cores.
  std::optional<net::thread_pool> cluster_calls_;
  std::string instance_id_;
  std::string started_at_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> in_flight_{0};
};

}  // namespace kc::server
