#include "server/status/metrics.h"

#include <cstdio>

namespace kc::server {

namespace {

// Written by hand: the format is a few lines of text, and prometheus-cpp is
// not available on the GPU machine.
std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.12g", value);
  return text;
}

void Header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// Label values here are our own identifiers, never client text, so they
// need no escaping.
void Sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " " + Number(value) + "\n";
}

// A tenant's name is the operator's text: quoted as the format asks.
std::string TenantLabel(const std::string& tenant) {
  std::string label = "tenant=\"";
  for (char c : tenant) {
    if (c == '\\' || c == '"') label += '\\';
    label += c == '\n' ? 'n' : c;
  }
  return label + "\"";
}

}  // namespace

void Metrics::RenderTenants(std::string& out,
                            const std::map<std::string, TenantQuotas::Reading>& readings,
                            const std::map<std::string, int>& waiting) {
  Header(out, "kcoral_tenant_requests_total", "counter", "Requests admitted, by tenant.");
  for (const auto& [tenant, r] : readings)
    Sample(out, "kcoral_tenant_requests_total", TenantLabel(tenant),
           static_cast<double>(r.requests));
  Header(out, "kcoral_tenant_refused_total", "counter",
         "Requests refused for a tenant's limit, by tenant and limit.");
  for (const auto& [tenant, r] : readings) {
    for (const auto& [limit, count] : r.refused)
      Sample(out, "kcoral_tenant_refused_total", TenantLabel(tenant) + ",limit=\"" + limit + "\"",
             static_cast<double>(count));
  }
  Header(out, "kcoral_tenant_in_flight", "gauge", "Requests admitted and not yet answered.");
  for (const auto& [tenant, r] : readings)
    Sample(out, "kcoral_tenant_in_flight", TenantLabel(tenant), static_cast<double>(r.in_flight));
  Header(out, "kcoral_tenant_queued", "gauge", "Requests waiting for a seat, by tenant.");
  for (const auto& [tenant, count] : waiting)
    Sample(out, "kcoral_tenant_queued", TenantLabel(tenant), count);
  Header(out, "kcoral_tenant_gpu_seconds_total", "counter", "GPU lease time used, by tenant.");
  for (const auto& [tenant, r] : readings)
    Sample(out, "kcoral_tenant_gpu_seconds_total", TenantLabel(tenant), r.gpu_seconds_total);
  Header(out, "kcoral_tenant_cpu_seconds_total", "counter",
         "Seat time off the GPU lease (compiles, CPU runs), by tenant.");
  for (const auto& [tenant, r] : readings)
    Sample(out, "kcoral_tenant_cpu_seconds_total", TenantLabel(tenant), r.cpu_seconds_total);
}

void Metrics::Histogram::Observe(double seconds) {
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ++at_most[i];
      break;
    }
  }
  sum += seconds;
  ++count;
}

void Metrics::Histogram::Render(std::string& out, const std::string& name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    cumulative += at_most[i];
    Sample(out, name + "_bucket", "le=\"" + Number(kBuckets[i]) + "\"",
           static_cast<double>(cumulative));
  }
  Sample(out, name + "_bucket", "le=\"+Inf\"", static_cast<double>(count));
  Sample(out, name + "_sum", "", sum);
  Sample(out, name + "_count", "", static_cast<double>(count));
}

void Metrics::Emit(EventLevel level, std::string_view event, nlohmann::json fields) {
  if (event.starts_with("worker_")) {
    std::lock_guard lock(mu_);
    // worker_retired says why; worker_failed says in which phase.
    ++workers_[{std::string(event), fields.value("reason", fields.value("phase", ""))}];
  }
  next_.Emit(level, event, std::move(fields));
}

void Metrics::RecordRequest(int http_status, const std::string& finish_reason, double total_ms) {
  std::lock_guard lock(mu_);
  ++requests_[{http_status, finish_reason}];
  request_seconds_.Observe(total_ms / 1000);
}

void Metrics::RecordRun(const pool::JobResult& result) {
  std::lock_guard lock(mu_);
  queue_seconds_.Observe(result.queue_ms / 1000);
  lease_wait_seconds_ += result.run.lease_wait_ms / 1000;
  lease_held_seconds_ += result.run.lease_held_ms / 1000;
  span_wait_seconds_ += result.run.span_wait_ms / 1000;
  span_seconds_ += result.run.span_held_ms / 1000;
  housekeeping_beside_spans_ += result.run.housekeeping_beside_spans;
}

// Per GPU, read live from the arbiter (duty: pool/duty_meter.h).
void Metrics::RenderGpus(std::string& out, const std::vector<pool::GpuArbiter::Activity>& gpus) {
  if (gpus.empty()) return;
  auto label = [](int gpu) { return "gpu=\"" + std::to_string(gpu) + "\""; };
  Header(out, "kcoral_gpu_duty_ratio", "gauge",
         "Duty: the fraction of wall time the GPU spent inside benchmark timing spans, over the "
         "last 60 s (window=\"60s\"; less right after the start) and since the server started.");
  for (const auto& gpu : gpus) {
    Sample(out, "kcoral_gpu_duty_ratio", label(gpu.gpu) + ",window=\"60s\"", gpu.duty.last_window);
    Sample(out, "kcoral_gpu_duty_ratio", label(gpu.gpu) + ",window=\"since_start\"",
           gpu.duty.since_start);
  }
  Header(out, "kcoral_gpu_timing_span_seconds_total", "counter",
         "Time the GPU spent inside benchmark timing spans, open spans included.");
  for (const auto& gpu : gpus)
    Sample(out, "kcoral_gpu_timing_span_seconds_total", label(gpu.gpu), gpu.duty.inside_seconds);
  Header(out, "kcoral_gpu_housekeeping_running", "gauge",
         "CUDA contexts being created or destroyed on the GPU now (stand-bys, retirements).");
  for (const auto& gpu : gpus)
    Sample(out, "kcoral_gpu_housekeeping_running", label(gpu.gpu), gpu.housekeeping_running);
  Header(out, "kcoral_gpu_lease_depth", "gauge", "The GPU lease's holder plus its waiters.");
  for (const auto& gpu : gpus)
    Sample(out, "kcoral_gpu_lease_depth", label(gpu.gpu), gpu.depth);
}

std::string Metrics::Render(const pool::PoolLoad& load, bool shutting_down) const {
  std::lock_guard lock(mu_);
  std::string out;
  Header(out, "kcoral_requests_total", "counter",
         "Finished /execute requests by HTTP status and finish reason.");
  for (const auto& [key, count] : requests_) {
    Sample(out, "kcoral_requests_total",
           "code=\"" + std::to_string(key.first) + "\",finish_reason=\"" + key.second + "\"",
           static_cast<double>(count));
  }
  Header(out, "kcoral_request_duration_seconds", "histogram",
         "Time from receiving an /execute request to its answer.");
  request_seconds_.Render(out, "kcoral_request_duration_seconds");
  Header(out, "kcoral_queue_wait_seconds", "histogram", "Time a program waited for a worker seat.");
  queue_seconds_.Render(out, "kcoral_queue_wait_seconds");
  Header(out, "kcoral_lease_wait_seconds_total", "counter",
         "Time programs spent waiting for a GPU lease (not counted against their timeout).");
  Sample(out, "kcoral_lease_wait_seconds_total", "", lease_wait_seconds_);
  Header(out, "kcoral_lease_held_seconds_total", "counter", "Time programs held a GPU lease.");
  Sample(out, "kcoral_lease_held_seconds_total", "", lease_held_seconds_);
  Header(out, "kcoral_span_wait_seconds_total", "counter",
         "Time benchmark timing spans waited for CUDA contexts being created or destroyed.");
  Sample(out, "kcoral_span_wait_seconds_total", "", span_wait_seconds_);
  Header(out, "kcoral_span_seconds_total", "counter",
         "Time inside benchmark timing spans (warm-up, checks and timed calls), all GPUs: its "
         "rate per GPU is the GPU's duty cycle.");
  Sample(out, "kcoral_span_seconds_total", "", span_seconds_);
  Header(out, "kcoral_housekeeping_beside_spans_total", "counter",
         "CUDA contexts created or destroyed while a benchmark on their GPU was timing "
         "(--housekeeping beside-spans; 0 under outside-spans).");
  Sample(out, "kcoral_housekeeping_beside_spans_total", "",
         static_cast<double>(housekeeping_beside_spans_));
  Header(out, "kcoral_worker_events_total", "counter",
         "Worker lifecycle events (worker_ready, worker_retired by reason, worker_failed).");
  for (const auto& [key, count] : workers_) {
    Sample(out, "kcoral_worker_events_total",
           "event=\"" + key.first + "\",reason=\"" + key.second + "\"", static_cast<double>(count));
  }
  Header(out, "kcoral_request_capacity", "gauge", "Worker seats (programs that can run at once).");
  Sample(out, "kcoral_request_capacity", "", load.request_capacity);
  Header(out, "kcoral_requests_in_progress", "gauge", "Programs running on a worker now.");
  Sample(out, "kcoral_requests_in_progress", "", load.requests_in_progress);
  Header(out, "kcoral_requests_waiting", "gauge", "Programs queued for a seat now.");
  Sample(out, "kcoral_requests_waiting", "", load.requests_waiting);
  RenderGpus(out, load.gpus);
  Header(out, "kcoral_shutting_down", "gauge", "1 once SIGTERM or SIGINT has arrived.");
  Sample(out, "kcoral_shutting_down", "", shutting_down ? 1 : 0);
  return out;
}

}  // namespace kc::server
