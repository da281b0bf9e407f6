// Metrics: what GET /metrics reports, in the Prometheus text format (0.0.4):
// finished requests by HTTP status and finish reason, request latency, queue
// wait, GPU lease time, the pool's load, and the pool's worker events.
//
// It sits in front of the event log as the pool's EventSink, so worker events
// (worker_retired and its reason, worker_failed, ...) are counted without the
// pool knowing about metrics. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pool/event_sink.h"
#include "pool/worker_pool.h"
#include "server/tenancy/tenant_quotas.h"

namespace kc::server {

class Metrics : public pool::EventSink {
 public:
  explicit Metrics(pool::EventSink& next) : next_(next) {}

  // Counts the event, then passes it on unchanged.
  void Emit(EventLevel level, std::string_view event, nlohmann::json fields) override;

  void RecordRequest(int http_status, const std::string& finish_reason, double total_ms);
  // Queue wait and lease time of a program that reached a worker.
  void RecordRun(const pool::JobResult& result);

  std::string Render(const pool::PoolLoad& load, bool shutting_down) const;
  // Usage per tenant (tenant names only, never keys); "" is everyone without a key.
  static void RenderTenants(std::string& out,
                            const std::map<std::string, TenantQuotas::Reading>& readings,
                            const std::map<std::string, int>& waiting);

 private:
  // Upper bounds in seconds, from a trivial CPU round trip to a long benchmark.
  static constexpr std::array<double, 14> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                      1,     2.5,  5,     10,   30,  120,  600};
  static void RenderGpus(std::string& out, const std::vector<pool::GpuArbiter::Activity>& gpus);

  struct Histogram {
    std::array<uint64_t, kBuckets.size()> at_most{};  // cumulative when rendered
    double sum = 0;
    uint64_t count = 0;
    void Observe(double seconds);
    void Render(std::string& out, const std::string& name) const;
  };

  pool::EventSink& next_;
  mutable std::mutex mu_;
  std::map<std::pair<int, std::string>, uint64_t> requests_;         // (status, reason); mu_
  std::map<std::pair<std::string, std::string>, uint64_t> workers_;  // (event, reason); mu_
  Histogram request_seconds_;                                        // mu_
  Histogram queue_seconds_;                                          // mu_
  double lease_wait_seconds_ = 0;                                    // mu_
  double span_wait_seconds_ = 0;                                     // mu_
  double span_seconds_ = 0;                                          // mu_
  uint64_t housekeeping_beside_spans_ = 0;                           // mu_
  double lease_held_seconds_ = 0;                                    // mu_
};

}  // namespace kc::server
