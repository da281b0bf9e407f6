// CuptiTimer: the GPU `benchmark` algorithm (spec/benchmark.md §1.3, improved per §9).
//
// Differences from the reference, all deliberate:
//   - the L2 flush buffer is persistent (L2Flush) and CUPTI stays registered (ActivityCollector);
//   - the per-call estimate excludes the flush: events around 5 x (flush + call) minus events
//     around 5 x flush, divided by 5 (§1.7 last bullet);
//   - counts are capped at kMaxIterations.
// The timed loop is "drained" (flush -> sync -> t0 -> call -> t1 -> sync) and timed only by
// CUPTI activity records; there is no silent fallback to events.
//
// Usage:
//   CuptiTimer timer(*collector, flush);
//   StatusOr<BenchmarkResult> result = timer.Run(options, [&] { return CallUserFunction(); });
//
// Not thread-safe; one benchmark at a time per process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "base/status.h"
#include "native/activity_collector.h"
#include "native/l2_flush.h"

namespace kc::native {

// Upper bound for every iteration count, explicit or derived.
inline constexpr int64_t kMaxIterations = 100'000;
// Calls per estimate pass (spec/benchmark.md §1.3 step 2).
inline constexpr int kEstimateCalls = 5;

enum class FlushMode { kNone, kBeforeEveryCall };

struct BenchmarkOptions {
  std::optional<int64_t> warmup;  // explicit count (>= 0); overrides warmup_ms
  std::optional<int64_t> repeat;  // explicit count (>= 1); overrides repeat_ms
  double warmup_ms = 25.0;
  double repeat_ms = 100.0;
  FlushMode flush = FlushMode::kBeforeEveryCall;
};

struct BenchmarkResult {
  std::vector<double> samples_ms;  // one CUPTI span per timed iteration
  bool activities_stable = true;
  int64_t warmup = 0;
  int64_t repeat = 0;
  FlushMode flush = FlushMode::kNone;
  // Per-call estimate (flush excluded) that derived the counts; -1 when both were explicit.
  double estimate_ms = -1.0;
};

// The benchmarked call. A non-OK status stops the benchmark and is returned unchanged; the
// caller keeps whatever detail it needs (e.g. a Python exception) on its side.
using BenchmarkCall = std::function<Status()>;

// count = explicit value, or max(minimum, int(budget_ms / estimate_ms)); capped at
// kMaxIterations, and the cap itself when estimate_ms <= 0.
int64_t IterationCount(std::optional<int64_t> explicit_count, double budget_ms, double estimate_ms,
                       int64_t minimum);

class CuptiTimer {
 public:
  CuptiTimer(ActivityCollector& collector, L2Flush& flush) : collector_(collector), flush_(flush) {}

  StatusOr<BenchmarkResult> Run(const BenchmarkOptions& options, const BenchmarkCall& call);

 private:
  StatusOr<double> EstimateCallMs(FlushMode flush, const BenchmarkCall& call);
  StatusOr<float> TimeWithEvents(int calls, FlushMode flush, const BenchmarkCall* call);
  Status WarmUp(int64_t count, FlushMode flush, const BenchmarkCall& call);
  StatusOr<std::vector<HostWindow>> TimedLoop(int64_t count, FlushMode flush,
                                              const BenchmarkCall& call);
  Status MaybeFlush(FlushMode flush);

  ActivityCollector& collector_;
  L2Flush& flush_;
};

}  // namespace kc::native
