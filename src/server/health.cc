// GET /health (spec/protocol.md §1.3): exactly the reference keys, then ours.
// GET /metrics: the same load, with counters, in the Prometheus text format.
#include <set>

#include "server/app.h"

namespace kc::server {

HttpReply App::HandleHealth() const {
  const pool::PoolLoad load = pool_->Load();
  const nlohmann::json& describe = pool_->describe();
  nlohmann::ordered_json body;
  body["status"] = "ok";
  body["instance_id"] = instance_id_;
  body["started_at"] = started_at_;
  const std::set<int> distinct(config_.gpus.begin(), config_.gpus.end());
  body["gpu_count"] = config_.device == Device::kCpu ? 0 : static_cast<int>(distinct.size());
  body["load"] = {{"request_capacity", load.request_capacity},
                  {"requests_in_progress", load.requests_in_progress},
                  {"requests_waiting", load.requests_waiting}};
  body["target"] = describe.value("target", nlohmann::json::object());
  body["versions"] = describe.value("versions", nlohmann::json::object());
  // Additions (the reference client ignores extra keys).
  body["device"] = FlagText(config_.device);
  body["cpu_execution"] =
      config_.device == Device::kCpu ? FlagText(config_.cpu_execution) : std::string_view();
  body["shutting_down"] = shutting_down_.load();
  body["auth"] = access_->enabled() ? "keys" : "none";
  body["tls"] = tls_.has_value();
  body["sandbox"] = pool_->DescribeSandbox();
  body["worker_cpu_threads"] = WorkerCpuThreads(config_);
  body["worker_heap_mbytes"] = WorkerHeapMbytes(config_);
  if (config_.device == Device::kGpu) {
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
    body["gpu_scheduling"] = {{"housekeeping", FlagText(config_.housekeeping)},
                              {"cuda_max_connections", config_.cuda_max_connections},
                              {"gpus", std::move(gpus)}};
  }
  if (cluster_) {
    nlohmann::json cluster = cluster_->Describe();  // the whole cluster's view
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

HttpReply App::HandleMetrics() const {
  std::string text = metrics_.Render(pool_->Load(), shutting_down_.load());
  // The dashboard's shared status (status_board.h): builds rise at most once a second.
  text +=
      "# HELP kcoral_dashboard_snapshot_builds_total Dashboard status snapshots built (at most "
      "one a second, shared by every viewer of /api/status).\n"
      "# TYPE kcoral_dashboard_snapshot_builds_total counter\n"
      "kcoral_dashboard_snapshot_builds_total " +
      std::to_string(status_board_.builds()) + "\n";
  Metrics::RenderTenants(text, quotas_.Readings(), pool_->WaitingByTenant());
  return {200, "text/plain; version=0.0.4; charset=utf-8", std::move(text), ""};
}

net::awaitable<HttpReply> App::HandleUsage(std::optional<Caller> caller) {
  // In a cluster each tenant's sums are read from the cluster's ledger (a NATS round trip).
  auto usage = ClusterCall([this, caller = std::move(caller)]() -> HttpReply {
    nlohmann::json body;
    if (caller && caller->role == Role::kOperator) {  // every tenant's
      body["tenants"] = nlohmann::json::array();
      for (const auto& [tenant, reading] : quotas_.Readings())
        body["tenants"].push_back(quotas_.Usage(tenant, access_->LimitsOf(tenant)));
    }
    const std::string tenant = caller ? caller->tenant : "";
    body["usage"] = quotas_.Usage(tenant, access_->LimitsOf(tenant));
    return {200, "application/json", body.dump(), ""};
  });
  co_return co_await std::move(usage);
}

}  // namespace kc::server
