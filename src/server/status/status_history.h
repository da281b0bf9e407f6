// StatusHistory: the last hour of the server in kStep intervals, for the dashboard's charts
// (GET /api/status, issue 28): finished requests, errors by kind, p50/p99 latency, and the GPU
// time spent holding leases and inside timing spans (the duty metric, pool/duty_meter.h).
//
// Requests are counted where metrics_.RecordRequest counts (app.cc, execute_route.cc), so an
// interval's requests add up to kcoral_requests_total's rise over it. GPU time comes from the
// arbiter's running totals (all GPUs), sampled now and then (SampleGpuTime: at the start, when a
// request finishes, when the dashboard's status is built); the rise between two samples is
// spread evenly over the intervals between them, so an interval never holds more GPU time than
// it had wall time, however long the request that spent it. Times are Unix milliseconds, passed
// in (tests choose them); intervals are aligned to multiples of kStep.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kc::server {

class StatusHistory {
 public:
  static constexpr std::chrono::seconds kStep{10};
  static constexpr size_t kIntervals = 360;  // one hour
  // Latencies kept per interval for its percentiles; past this, a uniform sample of them.
  static constexpr size_t kLatencySamples = 2048;

  struct Finished {
    int64_t unix_ms = 0;
    std::string error_kind;  // empty: no error
    double total_ms = 0;
  };
  void Record(const Finished& request);
  // The arbiter's totals since the server started, summed over its GPUs (GpuArbiter::Activity
  // held_total_seconds, duty.inside_seconds). Call once at the start, with zeros.
  void SampleGpuTime(int64_t unix_ms, double lease_held_seconds, double span_seconds);

  struct Point {
    int64_t start_unix_ms = 0;
    uint64_t requests = 0;
    std::map<std::string, uint64_t> errors;  // by kind
    double p50_ms = 0, p99_ms = 0;           // 0 when no request finished
    double lease_held_seconds = 0;           // GPU time in the interval, all GPUs
    double span_seconds = 0;
  };
  // Every interval of the hour up to `now_unix_ms`, oldest first; quiet ones are zero.
  std::vector<Point> Points(int64_t now_unix_ms) const;

 private:
  struct Interval {
    int64_t start_unix_ms = 0;
    uint64_t requests = 0;
    std::map<std::string, uint64_t> errors;
    std::vector<float> latencies_ms;  // until the next interval begins; then its percentiles
    double p50_ms = 0, p99_ms = 0;
  };
  struct GpuSample {
    int64_t unix_ms = 0;
    double lease_held_seconds = 0, span_seconds = 0;
  };
  static int64_t StartOf(int64_t unix_ms);
  Interval& At(int64_t start);  // the interval that starts at `start`, made if new; mu_ held
  static void Close(Interval& interval);  // computes its percentiles, frees its samples

  mutable std::mutex mu_;
  std::deque<Interval> intervals_;  // mu_: oldest first, at most kIntervals
  // mu_: the last sample of each interval that had one, oldest first, within the hour and one
  // before it (where the first interval's rise starts).
  std::deque<GpuSample> gpu_samples_;
  uint64_t sampler_ = 0x9e3779b97f4a7c15;  // mu_: xorshift state for the latency sample
};

// The q-quantile (0..1) of `values` by the nearest-rank method; 0 for none. Sorts `values`.
double NearestRank(std::vector<float>& values, double q);

}  // namespace kc::server
