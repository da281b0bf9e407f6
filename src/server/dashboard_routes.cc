// GET /dashboard (the page, its script and style: static, embedded, open) and GET /api/status
// (the JSON the page polls once a second; a key when the server has keys): issue 28. The
// status is built at most once a second for all viewers (status_board.h) from the pool's load,
// the GPUs' NVML readings, the last requests (request_ring.h), the last hour
// (status_history.h) and, in a cluster, the cluster's view of its nodes and pools.
#include <set>

#include "base/rounded.h"
#include "base/utc_time.h"
#include "server/app.h"
#include "server/dashboard_assets.h"

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

void App::CountFinished(const HttpReply& reply, double total_ms, const RequestRecord* record) {
  metrics_.RecordRequest(reply.status, std::string(reply.finish_reason()), total_ms);
  const int64_t now = UnixMillisecondsNow();
  history_.Record({.unix_ms = now, .error_kind = reply.error_kind, .total_ms = total_ms});
  if (record != nullptr) {
    RequestRecord kept = *record;
    kept.finished_unix_ms = now;
    requests_.Finish(std::move(kept));
  }
  if (config_.device == Device::kGpu && pool_ != nullptr) SampleGpuTime(pool_->Load(), now);
}

void App::SampleGpuTime(const pool::PoolLoad& load, int64_t unix_ms) const {
  double lease_held = 0, spans = 0;
  for (const auto& gpu : load.gpus) {
    lease_held += gpu.held_total_seconds;
    spans += gpu.duty.inside_seconds;
  }
  history_.SampleGpuTime(unix_ms, lease_held, spans);
}

StatusBoard::Snapshot App::BuildStatus() const {
  const pool::PoolLoad load = pool_->Load();
  const int64_t now = UnixMillisecondsNow();
  if (!load.gpus.empty()) SampleGpuTime(load, now);
  nlohmann::json status;
  status["generated_unix_ms"] = now;
  status["server"] = {{"instance_id", instance_id_},
                      {"started_at", started_at_},
                      {"device", FlagText(config_.device)},
                      {"node_url", node_url_},
                      {"auth", access_->enabled() ? "keys" : "none"},
                      {"shutting_down", shutting_down_.load()},
                      {"target", pool_->describe().value("target", nlohmann::json::object())}};
  status["gpus"] = GpusJson(load, gpu_telemetry_ ? gpu_telemetry_->Read() : nlohmann::json());
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
  for (const auto& [tenant, count] : requests_.InFlightByTenant())
    by_tenant[tenant] = {{"in_flight", count}, {"waiting", 0}};
  for (const auto& [tenant, count] : pool_->WaitingByTenant()) {
    if (!by_tenant.contains(tenant)) by_tenant[tenant] = {{"in_flight", count}};
    by_tenant[tenant]["waiting"] = count;
  }
  status["queue"] = {{"capacity", load.request_capacity},
                     {"in_progress", load.requests_in_progress},
                     {"waiting", load.requests_waiting},
                     {"by_tenant", std::move(by_tenant)}};
  status["timeline_fields"] = kTimelineFields;
  status["requests_finished"] = requests_.finished();
  // Only the intervals with something in them; the page fills in the quiet ones from first_t.
  nlohmann::json points = nlohmann::json::array();
  const std::vector<StatusHistory::Point> hour = history_.Points(now);
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
  status["cluster"] = cluster_ ? cluster_->Describe() : nlohmann::json(nullptr);
  status["stream_viewers"] = status_streams_ ? status_streams_->viewers() : 0;
  return {std::move(status), requests_.Rendered()};
}

HttpReply App::HandleDashboard(std::string_view target) const {
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

net::awaitable<HttpReply> App::HandleStatus(std::optional<Caller> caller) {
  // A ready text is answered here; a build (about a millisecond) runs on the parse pool, so the
  // event loop keeps serving /execute meanwhile.
  std::optional<StatusBoard::Seen> seen = status_board_.Ready(caller, Clock::now());
  if (!seen) {
    auto viewing =
        OnPool(cpu_pool_, [this, caller] { return status_board_.View(caller, Clock::now()); });
    seen = co_await std::move(viewing);
  }
  HttpReply reply{200, "application/json", *seen->text, ""};
  reply.headers = {{"Cache-Control", "no-store"},
                   {"X-Content-Type-Options", "nosniff"},
                   {"X-KCoral-Snapshot-Age-Ms", std::to_string(seen->age.count())},
                   {"X-KCoral-Snapshot-Every-Ms", std::to_string(status_board_.max_age().count())}};
  co_return reply;
}

std::optional<HttpReply> App::StreamStatus(net::ip::tcp::socket& socket,
                                           std::optional<Caller> caller, bool gzip) {
  if (shutting_down_)
    return EndingReply(RequestEnding::kShuttingDown, "the server is stopping", "");
  if (!status_streams_->Add(socket, std::move(caller), gzip)) {
    return EndingReply(RequestEnding::kSaturated,
                       std::to_string(StatusStreams::kMaxViewers) +
                           " status streams are open; poll GET /api/status instead",
                       "");
  }
  return std::nullopt;
}

}  // namespace kc::server
