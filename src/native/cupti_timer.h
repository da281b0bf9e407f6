// CuptiTimer: the GPU `benchmark` algorithm (spec/benchmark.md §1.3, improved per §9).
//
// Differences from the reference, all deliberate:
//   - the L2 flush buffer is persistent (L2Flush) and CUPTI stays registered (ActivityCollector);
//   - the estimate times 5 x (flush + call) with events, as the reference does, so the budgets
//     bound the wall time the loops take (and the lease is held);
//   - attribution also takes device work by time (activity_attribution.h), so hiding the API
//     records of a launch does not hide the launch;
//   - counts are capped at kMaxIterations.
// The timed loop is "drained" (flush -> sync -> t0 -> call -> t1 -> sync) and timed only by
// CUPTI activity records; there is no silent fallback to events. Each timed call runs behind a
// launch gate (launch_gate.h) unless options.launch_gate is false, so that its span starts once
// all its launches are queued.
//
// Before the warm-up, each function gets one untimed "first checked call" whose outputs are the
// reference of the argument rotation (argument_rotation.h). Every call is preceded by the
// persisting-L2 reset (persisting_l2.h) and the flush.
//
// Usage:
//   CuptiTimer timer(*collector, flush);
//   StatusOr<BenchmarkResult> result = timer.Run(options, call, hooks);
//
// Not thread-safe; one benchmark at a time per process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "native/activity_collector.h"
#include "native/benchmark_report.h"
#include "native/l2_flush.h"
#include "native/launch_gate.h"
#include "native/persisting_l2.h"

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
  int functions = 1;  // 2: a paired benchmark, calls interleaved (ABBA)
  // Hold each timed call's GPU work back until the call returned (launch_gate.h), so host
  // launch gaps stay out of the span. The cfg key `launch_gate`.
  bool launch_gate = true;
};

struct BenchmarkResult {
  std::vector<SampleSet> functions;  // options.functions entries: one CUPTI span per timed call
  int64_t warmup = 0;
  int64_t repeat = 0;
  FlushMode flush = FlushMode::kNone;
  // Per-call estimate (flush excluded) that derived the counts; -1 when both were explicit.
  double estimate_ms = -1.0;
  // Device activities inside a timed window that no API record in the window launched.
  int64_t unattributed_activities = 0;
  // Timed device activities a CUDA graph launched; timed calls with no device activity.
  int64_t graph_activities = 0;
  int64_t empty_windows = 0;
  std::vector<std::string> flags;  // from the persisting-L2 guard
  // The launch gate: timed calls that ran behind it, and gates that timed out (a call that
  // synchronized, or whose host side outlasted kLaunchGateTimeoutNs). The first timeout, or a
  // gate that never started, stops gating for the rest of the benchmark; gate_note says which
  // call and why. Empty while every call was gated, or when options.launch_gate was false.
  int64_t gated_calls = 0;
  int64_t gate_timeouts = 0;
  std::string gate_note;
  // The timer's canaries (timer_canary.h): launched after each timed call, and seen by CUPTI.
  int64_t canaries_launched = 0;
  int64_t canaries_seen = 0;
  // The kernels the timed calls launched, by name (CUPTI's, mangled), with their counts.
  std::vector<std::pair<std::string, int64_t>> kernels;
};

// Calls function `fn` of the benchmark; `call` counts every call of the benchmark from 0, so
// the caller can pick that call's arguments. A non-OK status stops the benchmark and is
// returned unchanged; the caller keeps whatever detail it needs (a Python exception).
using BenchmarkCall = std::function<Status(int fn, int64_t call)>;

// What runs around the calls, outside the timed spans (the argument rotation).
class CallHooks {
 public:
  virtual ~CallHooks() = default;
  virtual Status BeforeCall(int fn, int64_t call) = 0;
  // After the first call of `fn`, drained: its outputs are the reference.
  virtual Status AfterFirstCall(int fn, int64_t call) = 0;
  // After a first call: whether the outputs' spread wants one more (16-bit atomics).
  virtual bool WantsSpreadCall(int /*fn*/) { return false; }
  virtual Status BeginTimed(int64_t repeat) = 0;
  // After timed call number `slot` of `fn`, drained.
  virtual Status AfterTimedCall(int fn, int64_t call, int64_t slot) = 0;
};

// count = explicit value, or max(minimum, int(budget_ms / estimate_ms)); capped at
// kMaxIterations, and the cap itself when estimate_ms <= 0.
int64_t IterationCount(std::optional<int64_t> explicit_count, double budget_ms, double estimate_ms,
                       int64_t minimum);

class CuptiTimer {
 public:
  CuptiTimer(ActivityCollector& collector, L2Flush& flush) : collector_(collector), flush_(flush) {}

  StatusOr<BenchmarkResult> Run(const BenchmarkOptions& options, const BenchmarkCall& call,
                                CallHooks& hooks);

 private:
  struct Window {
    HostWindow host;
    int fn = 0;
  };

  // One untimed call of fn, everything around it included.
  Status Untimed(int fn, FlushMode flush, const BenchmarkCall& call, CallHooks& hooks);
  Status FirstCalls(const BenchmarkOptions& options, const BenchmarkCall& call, CallHooks& hooks);
  StatusOr<double> EstimateCallMs(const BenchmarkOptions& options, const BenchmarkCall& call,
                                  CallHooks& hooks);
  StatusOr<float> TimeWithEvents(int rounds, const BenchmarkOptions& options,
                                 const BenchmarkCall* call, CallHooks& hooks);
  Status WarmUp(int64_t count, const BenchmarkOptions& options, const BenchmarkCall& call,
                CallHooks& hooks);
  StatusOr<std::vector<Window>> TimedLoop(int64_t count, const BenchmarkOptions& options,
                                          const BenchmarkCall& call, CallHooks& hooks,
                                          BenchmarkResult& result);
  // Closes the gate before timed call `slot` while gating_; a gate that did not start ends
  // gating (noted in `result`). Returns whether the call runs gated.
  StatusOr<bool> CloseGate(int64_t slot, BenchmarkResult& result);
  // After a gated call, drained: counts it, and ends gating when its gate timed out.
  Status CountGate(int64_t slot, BenchmarkResult& result);
  Status PrepareCache(FlushMode flush);

  ActivityCollector& collector_;
  L2Flush& flush_;
  PersistingL2Guard persisting_;
  LaunchGate gate_;
  bool gating_ = false;  // the timed loop gates its calls; set from options.launch_gate
  int64_t calls_ = 0;    // every call so far, untimed ones included
};

}  // namespace kc::native
