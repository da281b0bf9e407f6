#include "server/status/status_routes.h"

#include <set>

#include "base/rounded.h"
#include "base/utc_time.h"
#include "cluster/cluster_node.h"
#include "pool/worker_pool.h"
#include "server/core/server_config.h"
#include "server/status/dashboard_assets.h"
#include "server/status/event_log.h"
#include "server/status/metrics.h"
#include "server/status/request_accounting.h"
#include "server/status/request_ring.h"
#include "server/status/status_history.h"
#include "server/tenancy/access_control.h"
#include "server/tenancy/tenant_quotas.h"
#include "store/blob_store.h"

namespace kc::server {

namespace {

// The page runs our script and style only, and talks to its own server only.
constexpr std::string_view kPagePolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// The arbiter's view of each GPU (pool/gpu_arbiter.h) joined with its NVML reading.
nlohmann::json GpusJson(const pool::PoolLoad& load, nlohmann::json readings) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& gpu : load.gpus) {
    nlohmann::json entry = {{"gpu", gpu.gpu},
                            {"lease_holder", gpu.holder},
                            {"lease_held_seconds", Rounded(gpu.held_seconds)},
                            {"lease_depth", gpu.depth},
                            {"span_in_progress", gpu.duty.inside},
                            {"duty_last_60s", Rounded(gpu.duty.last_window, 1e-4)},
                            {"duty_since_start", Rounded(gpu.duty.since_start, 1e-4)},
                            {"housekeeping_running", gpu.housekeeping_running}};
    for (const auto& reading : readings) {
      if (reading.value("gpu", -1) == gpu.gpu) entry.update(reading);
    }
    gpus.push_back(std::move(entry));
  }
  return gpus;
}

}  // namespace

StatusRoutes::StatusRoutes(Services& services, GpuTelemetry* telemetry)
    : services_(services),
      telemetry_(telemetry),
      streams_(std::make_unique<StatusStreams>(board_)) {}

StatusRoutes::~StatusRoutes() {
  streams_.reset();
}

HttpReply StatusRoutes::Health() const {
  const pool::PoolLoad load = services_.pool.Load();
  const nlohmann::json& describe = services_.pool.describe();
  nlohmann::ordered_json body;
  body["status"] = "ok";
  body["instance_id"] = services_.state.instance_id;
  body["started_at"] = services_.state.started_at;
  const std::set<int> distinct(services_.config.gpus.begin(), services_.config.gpus.end());
  body["gpu_count"] =
      services_.config.device == Device::kCpu ? 0 : static_cast<int>(distinct.size());
  body["load"] = {{"request_capacity", load.request_capacity},
                  {"requests_in_progress", load.requests_in_progress},
                  {"requests_waiting", load.requests_waiting}};
  body["target"] = describe.value("target", nlohmann::json::object());
  body["versions"] = describe.value("versions", nlohmann::json::object());
  // Additions (the reference client ignores extra keys).
  body["device"] = FlagText(services_.config.device);
  body["cpu_execution"] = services_.config.device == Device::kCpu
                              ? FlagText(services_.config.cpu_execution)
                              : std::string_view();
  body["shutting_down"] = services_.state.shutting_down.load();
  body["auth"] = services_.access.enabled() ? "keys" : "none";
  body["tls"] = services_.state.tls;
  body["sandbox"] = services_.pool.DescribeSandbox();
  body["worker_cpu_threads"] = WorkerCpuThreads(services_.config);
  body["worker_heap_mbytes"] = WorkerHeapMbytes(services_.config);
  if (services_.config.device == Device::kGpu) {
    // Duty (pool/duty_meter.h): the share of wall time inside benchmark timing spans.
    nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
    for (const auto& gpu : load.gpus) {
      gpus.push_back({{"gpu", gpu.gpu},
                      {"duty_last_60s", gpu.duty.last_window},
                      {"duty_since_start", gpu.duty.since_start},
                      {"timing_span_seconds", gpu.duty.inside_seconds},
                      {"housekeeping_running", gpu.housekeeping_running},
                      {"lease_depth", gpu.depth}});
    }
    body["gpu_scheduling"] = {{"housekeeping", FlagText(services_.config.housekeeping)},
                              {"cuda_max_connections", services_.config.cuda_max_connections},
                              {"gpus", std::move(gpus)}};
  }
  if (services_.cluster != nullptr) {
    nlohmann::json cluster = services_.cluster->Describe();  // the whole cluster's view
    // The arch a client compiles for is the cluster's GPU arch, whichever node it asks, so
    // the seed's two requests work through one URL; with several, each pool says its own.
    std::set<std::string> archs;
    nlohmann::json gpu_target;
    for (const auto& pool : cluster["pools"]) {
      if (!pool.value("pool", "").starts_with("gpu/")) continue;
      archs.insert(pool.value("pool", ""));
      gpu_target = pool.value("target", nlohmann::json::object());
    }
    if (archs.size() == 1) body["target"] = gpu_target;
    body["cluster"] = std::move(cluster);
  }
  return {200, "application/json", DumpJson(body), ""};
}

HttpReply StatusRoutes::MetricsPage() const {
  std::string text =
      services_.metrics.Render(services_.pool.Load(), services_.state.shutting_down.load());
  // The dashboard's shared status (status_board.h): builds rise at most once a second.
  text +=
      "# HELP kcoral_dashboard_snapshot_builds_total Dashboard status snapshots built (at most "
      "one a second, shared by every viewer of /api/status).\n"
      "# TYPE kcoral_dashboard_snapshot_builds_total counter\n"
      "kcoral_dashboard_snapshot_builds_total " +
      std::to_string(board_.builds()) + "\n";
  Metrics::RenderTenants(text, services_.quotas.Readings(), services_.pool.WaitingByTenant());
  return {200, "text/plain; version=0.0.4; charset=utf-8", std::move(text), ""};
}

net::awaitable<HttpReply> StatusRoutes::Usage(std::optional<Caller> caller) {
  // In a cluster each tenant's sums are read from the cluster's ledger (a NATS round trip).
  auto usage = ClusterCall(services_, [this, caller = std::move(caller)]() -> HttpReply {
    nlohmann::json body;
    if (caller && caller->role == Role::kOperator) {  // every tenant's
      body["tenants"] = nlohmann::json::array();
      for (const auto& [tenant, reading] : services_.quotas.Readings())
        body["tenants"].push_back(
            services_.quotas.Usage(tenant, services_.access.LimitsOf(tenant)));
    }
    const std::string tenant = caller ? caller->tenant : "";
    body["usage"] = services_.quotas.Usage(tenant, services_.access.LimitsOf(tenant));
    return {200, "application/json", body.dump(), ""};
  });
  co_return co_await std::move(usage);
}

StatusBoard::Snapshot StatusRoutes::Build() const {
  const pool::PoolLoad load = services_.pool.Load();
  const int64_t now = UnixMillisecondsNow();
  if (!load.gpus.empty()) SampleGpuTime(services_.history, load, now);
  nlohmann::json status;
  status["generated_unix_ms"] = now;
  status["server"] = {
      {"instance_id", services_.state.instance_id},
      {"started_at", services_.state.started_at},
      {"device", FlagText(services_.config.device)},
      {"node_url", services_.node_url},
      {"auth", services_.access.enabled() ? "keys" : "none"},
      {"shutting_down", services_.state.shutting_down.load()},
      {"target", services_.pool.describe().value("target", nlohmann::json::object())}};
  status["gpus"] = GpusJson(load, telemetry_ != nullptr ? telemetry_->Read() : nlohmann::json());
  nlohmann::json devices = nlohmann::json::array();
  for (const pool::DeviceLoad& device : load.devices) {
    devices.push_back({{"name", device.name},
                       {"seats", device.seats},
                       {"busy", device.workers.busy},
                       {"standby", device.workers.standby},
                       {"preparing", device.workers.preparing},
                       {"retiring", device.workers.retiring}});
  }
  status["devices"] = std::move(devices);
  // by_tenant: requests in flight (queued or running) and waiting for a seat, by tenant ("":
  // no keys).
  nlohmann::json by_tenant = nlohmann::json::object();
  for (const auto& [tenant, count] : services_.requests.InFlightByTenant())
    by_tenant[tenant] = {{"in_flight", count}, {"waiting", 0}};
  for (const auto& [tenant, count] : services_.pool.WaitingByTenant()) {
    if (!by_tenant.contains(tenant)) by_tenant[tenant] = {{"in_flight", count}};
    by_tenant[tenant]["waiting"] = count;
  }
  status["queue"] = {{"capacity", load.request_capacity},
                     {"in_progress", load.requests_in_progress},
                     {"waiting", load.requests_waiting},
                     {"by_tenant", std::move(by_tenant)}};
  status["timeline_fields"] = kTimelineFields;
  status["requests_finished"] = services_.requests.finished();
  // Only the intervals with something in them; the page fills in the quiet ones from first_t.
  nlohmann::json points = nlohmann::json::array();
  const std::vector<StatusHistory::Point> hour = services_.history.Points(now);
  for (const StatusHistory::Point& p : hour) {
    if (p.requests == 0 && p.lease_held_seconds == 0 && p.span_seconds == 0) continue;
    points.push_back({{"t", p.start_unix_ms},
                      {"requests", p.requests},
                      {"errors", p.errors},
                      {"p50_ms", Rounded(p.p50_ms)},
                      {"p99_ms", Rounded(p.p99_ms)},
                      {"lease_held_seconds", Rounded(p.lease_held_seconds)},
                      {"span_seconds", Rounded(p.span_seconds)}});
  }
  const int gpu_count = static_cast<int>(load.gpus.size());
  status["history"] = {{"step_seconds", StatusHistory::kStep.count()},
                       {"intervals", hour.size()},
                       {"first_t", hour.empty() ? 0 : hour.front().start_unix_ms},
                       {"gpu_count", gpu_count},
                       {"points", std::move(points)}};
  status["cluster"] =
      services_.cluster != nullptr ? services_.cluster->Describe() : nlohmann::json(nullptr);
  status["stream_viewers"] = streams_ ? streams_->viewers() : 0;
  return {std::move(status), services_.requests.Rendered()};
}

HttpReply StatusRoutes::Dashboard(std::string_view target) const {
  HttpReply reply{200, "text/html; charset=utf-8", std::string(kDashboardHtml), ""};
  if (target == "/dashboard/dashboard.js") {
    reply = {200, "text/javascript; charset=utf-8", std::string(kDashboardJs), ""};
  } else if (target == "/dashboard/dashboard.css") {
    reply = {200, "text/css; charset=utf-8", std::string(kDashboardCss), ""};
  }
  reply.headers = {{"Content-Security-Policy", std::string(kPagePolicy)},
                   {"X-Content-Type-Options", "nosniff"},
                   {"Referrer-Policy", "no-referrer"},
                   {"Cache-Control", "no-cache"}};
  return reply;
}

net::awaitable<HttpReply> StatusRoutes::StatusJson(std::optional<Caller> caller) {
  // A ready text is answered here; a build (about a millisecond) runs on the parse pool, so the
  // event loop keeps serving /execute meanwhile.
  std::optional<StatusBoard::Seen> seen = board_.Ready(caller, Clock::now());
  if (!seen) {
    auto viewing =
        OnPool(services_.cpu_pool, [this, caller] { return board_.View(caller, Clock::now()); });
    seen = co_await std::move(viewing);
  }
  HttpReply reply{200, "application/json", *seen->text, ""};
  reply.headers = {{"Cache-Control", "no-store"},
                   {"X-Content-Type-Options", "nosniff"},
                   {"X-KCoral-Snapshot-Age-Ms", std::to_string(seen->age.count())},
                   {"X-KCoral-Snapshot-Every-Ms", std::to_string(board_.max_age().count())}};
  co_return reply;
}

std::optional<HttpReply> StatusRoutes::Stream(net::ip::tcp::socket& socket,
                                              std::optional<Caller> caller, bool gzip) {
  if (services_.state.shutting_down)
    return EndingReply(RequestEnding::kShuttingDown, "the server is stopping", "");
  if (!streams_->Add(socket, std::move(caller), gzip)) {
    return EndingReply(RequestEnding::kSaturated,
                       std::to_string(StatusStreams::kMaxViewers) +
                           " status streams are open; poll GET /api/status instead",
                       "");
  }
  return std::nullopt;
}

}  // namespace kc::server
