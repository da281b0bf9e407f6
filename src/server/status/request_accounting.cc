#include "server/status/request_accounting.h"

#include <algorithm>

#include "base/utc_time.h"
#include "pool/worker_pool.h"
#include "server/core/server_config.h"
#include "server/status/event_log.h"
#include "server/status/request_ring.h"

namespace kc::server {

void CountFinished(Services& services, const HttpReply& reply, double total_ms,
                   const RequestRecord* record) {
  services.metrics.RecordRequest(reply.status, std::string(reply.finish_reason()), total_ms);
  const int64_t now = UnixMillisecondsNow();
  services.history.Record({.unix_ms = now, .error_kind = reply.error_kind, .total_ms = total_ms});
  if (record != nullptr) {
    RequestRecord kept = *record;
    kept.finished_unix_ms = now;
    services.requests.Finish(std::move(kept));
  }
  if (services.config.device == Device::kGpu)
    SampleGpuTime(services.history, services.pool.Load(), now);
}

void SampleGpuTime(StatusHistory& history, const pool::PoolLoad& load, int64_t unix_ms) {
  double lease_held = 0, spans = 0;
  for (const auto& gpu : load.gpus) {
    lease_held += gpu.held_total_seconds;
    spans += gpu.duty.inside_seconds;
  }
  history.SampleGpuTime(unix_ms, lease_held, spans);
}

RunUsage RecordRun(Metrics& metrics, const pool::JobResult& ran) {
  metrics.RecordRun(ran);
  const double gpu_seconds = (ran.run.lease_held_ms + ran.run.off_lease_gpu_ms) / 1000;
  return {gpu_seconds, std::max(ran.elapsed_ms / 1000 - ran.run.lease_held_ms / 1000, 0.0)};
}

}  // namespace kc::server
