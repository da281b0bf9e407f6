#include "native/cupti_timer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "base/iteration_count.h"
#include "native/cuda_status.h"
#include "native/timer_canary.h"

namespace kc::native {
namespace {

// The legacy default stream: torch's default stream unless the user changed it.
constexpr cudaStream_t kStream = 0;
constexpr size_t kMaxKernelNames = 32;

// Move-only cudaEvent_t owner.
class CudaEvent {
 public:
  static StatusOr<CudaEvent> Create() {
    cudaEvent_t event = nullptr;
    KC_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event));
    return CudaEvent(event);
  }
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&&) = delete;
  ~CudaEvent() {
    if (event_ != nullptr) static_cast<void>(cudaEventDestroy(event_));
  }
  cudaEvent_t get() const { return event_; }

 private:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_;
};

// Stops the CUPTI session on every early return from the timed loop.
class AbortOnExit {
 public:
  explicit AbortOnExit(ActivityCollector& collector) : collector_(&collector) {}
  AbortOnExit(const AbortOnExit&) = delete;
  AbortOnExit& operator=(const AbortOnExit&) = delete;
  ~AbortOnExit() {
    if (collector_ != nullptr) collector_->Abort();
  }
  void Dismiss() { collector_ = nullptr; }

 private:
  ActivityCollector* collector_;
};

Status Synchronize() {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return Status::Ok();
}

StatusOr<uint64_t> CuptiNow() {
  uint64_t ns = 0;
  KC_CUPTI_RETURN_IF_ERROR(cuptiGetTimestamp(&ns));
  return ns;
}

Status ValidateOptions(const BenchmarkOptions& options) {
  if (options.warmup && *options.warmup < 0) return InvalidArgumentError("warmup must be >= 0");
  if (options.repeat && *options.repeat < 1) return InvalidArgumentError("repeat must be >= 1");
  if (!std::isfinite(options.warmup_ms) || options.warmup_ms < 0) {
    return InvalidArgumentError("warmup_ms must be a finite number >= 0");
  }
  if (!std::isfinite(options.repeat_ms) || options.repeat_ms < 0) {
    return InvalidArgumentError("repeat_ms must be a finite number >= 0");
  }
  return Status::Ok();
}

struct TimedRun {
  std::vector<HostWindow> windows;
  ActivityRecords records;
};

}  // namespace

int64_t IterationCount(std::optional<int64_t> explicit_count, double budget_ms, double estimate_ms,
                       int64_t minimum) {
  if (explicit_count) return std::min(*explicit_count, kMaxIterations);
  return BudgetIterationCount(budget_ms, estimate_ms, minimum, kMaxIterations);
}

Status CuptiTimer::PrepareCache(FlushMode flush) {
  KC_RETURN_IF_ERROR(persisting_.BeforeCall());
  if (flush == FlushMode::kNone) return Status::Ok();
  return flush_.Enqueue(kStream);
}

Status CuptiTimer::Untimed(int fn, FlushMode flush, const BenchmarkCall& call, CallHooks& hooks) {
  const int64_t index = calls_++;
  KC_RETURN_IF_ERROR(hooks.BeforeCall(fn, index));
  KC_RETURN_IF_ERROR(PrepareCache(flush));
  return call(fn, index);
}

// One untimed call of each function, drained: first-use costs are not the kernel's, and it is
// checked against the reference, which chooses the tolerance; outputs whose rounding varies
// from call to call get more such calls, until their spread is known (hooks.WantsSpreadCall).
Status CuptiTimer::FirstCalls(const BenchmarkOptions& options, const BenchmarkCall& call,
                              CallHooks& hooks) {
  for (int fn = 0; fn < options.functions; ++fn) {
    do {
      const int64_t index = calls_++;
      KC_RETURN_IF_ERROR(hooks.BeforeCall(fn, index));
      KC_RETURN_IF_ERROR(PrepareCache(options.flush));  // allocates the flush buffer on first use
      // The poison must land before the call, whatever stream the call uses.
      KC_RETURN_IF_ERROR(Synchronize());
      KC_RETURN_IF_ERROR(call(fn, index));
      KC_RETURN_IF_ERROR(Synchronize());
      KC_RETURN_IF_ERROR(hooks.AfterFirstCall(fn, index));
    } while (hooks.WantsSpreadCall(fn));
  }
  return Status::Ok();
}

// `rounds` x (each function: flush?, call?) between two events on the legacy stream; ms.
StatusOr<float> CuptiTimer::TimeWithEvents(int rounds, const BenchmarkOptions& options,
                                           const BenchmarkCall* call, CallHooks& hooks) {
  KC_ASSIGN_OR_RETURN(CudaEvent start, CudaEvent::Create());
  KC_ASSIGN_OR_RETURN(CudaEvent stop, CudaEvent::Create());
  KC_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), kStream));
  for (int i = 0; i < rounds; ++i) {
    for (int fn = 0; fn < options.functions; ++fn) {
      KC_RETURN_IF_ERROR(Untimed(fn, options.flush, *call, hooks));
    }
  }
  KC_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop.get(), kStream));
  KC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop.get()));
  float elapsed_ms = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&elapsed_ms, start.get(), stop.get()));
  return elapsed_ms;
}

// Events, not CUPTI: the estimate only picks counts (spec/benchmark.md §1.4).
// It is the cost of one iteration, flush included, so that warmup_ms and
// repeat_ms bound the time the loops take (and the lease is held): with the
// flush left out, a 2 us kernel would get 25x the iterations the budget means.
// A paired benchmark's iteration is one call of each function.
StatusOr<double> CuptiTimer::EstimateCallMs(const BenchmarkOptions& options,
                                            const BenchmarkCall& call, CallHooks& hooks) {
  KC_ASSIGN_OR_RETURN(float with_calls_ms, TimeWithEvents(kEstimateCalls, options, &call, hooks));
  return static_cast<double>(with_calls_ms) / kEstimateCalls;
}

Status CuptiTimer::WarmUp(int64_t count, const BenchmarkOptions& options, const BenchmarkCall& call,
                          CallHooks& hooks) {
  for (int64_t i = 0; i < count; ++i) {
    for (int fn = 0; fn < options.functions; ++fn) {
      KC_RETURN_IF_ERROR(Untimed(fn, options.flush, call, hooks));
    }
  }
  return Synchronize();
}

StatusOr<bool> CuptiTimer::CloseGate(int64_t slot, BenchmarkResult& result) {
  if (!gating_) return false;
  const Status closed = gate_.Close();
  if (closed.code() == StatusCode::kDeadlineExceeded) {  // released and drained: run ungated
    gating_ = false;
    result.gate_note = "launch gate off from timed call " + std::to_string(slot) +
                       ": its kernel did not start within 1 s (the GPU was busy)";
    return false;
  }
  KC_RETURN_IF_ERROR(closed);
  return true;
}

Status CuptiTimer::CountGate(int64_t slot, BenchmarkResult& result) {
  KC_ASSIGN_OR_RETURN(GateOutcome outcome, gate_.Outcome());
  ++result.gated_calls;
  if (outcome == GateOutcome::kTimedOut) {
    ++result.gate_timeouts;
    gating_ = false;
    result.gate_note = "launch gate off from timed call " + std::to_string(slot) +
                       ": its gate timed out (20 ms), so the call waits for the GPU "
                       "(a synchronize, .item(), a copy to the host) or its host side took longer";
  }
  return Status::Ok();
}

// Each call: prepare the cache -> sync -> close the gate -> t0 -> call -> t1 -> open the gate ->
// sync -> t2, so the GPU is idle at both ends and the flush's memset and the gate, launched and
// started before t0, are never attributed to the call; the call's work queued behind the gate
// starts once the call returned (launch_gate.h). A paired benchmark alternates the order (AB,
// BA, ...) so drift falls on both alike.
StatusOr<std::vector<CuptiTimer::Window>> CuptiTimer::TimedLoop(int64_t count,
                                                                const BenchmarkOptions& options,
                                                                const BenchmarkCall& call,
                                                                CallHooks& hooks,
                                                                BenchmarkResult& result) {
  std::vector<Window> windows;
  windows.reserve(static_cast<size_t>(count * options.functions));
  gating_ = options.launch_gate;
  for (int64_t i = 0; i < count; ++i) {
    for (int k = 0; k < options.functions; ++k) {
      const int fn = (i % 2 == 1) ? options.functions - 1 - k : k;
      const int64_t index = calls_++;
      const int64_t slot = static_cast<int64_t>(windows.size());
      KC_RETURN_IF_ERROR(hooks.BeforeCall(fn, index));
      KC_RETURN_IF_ERROR(PrepareCache(options.flush));
      KC_RETURN_IF_ERROR(Synchronize());
      KC_ASSIGN_OR_RETURN(const bool gated, CloseGate(slot, result));
      Window window;
      window.fn = fn;
      KC_ASSIGN_OR_RETURN(window.host.begin_ns, CuptiNow());
      const Status called = call(fn, index);
      StatusOr<uint64_t> end_ns = CuptiNow();
      gate_.Open();  // on every path: a gate left closed would hold the GPU for its timeout
      KC_RETURN_IF_ERROR(called);
      KC_ASSIGN_OR_RETURN(window.host.end_ns, std::move(end_ns));
      KC_RETURN_IF_ERROR(Synchronize().WithContext("timed iteration " + std::to_string(i)));
      KC_ASSIGN_OR_RETURN(window.host.drained_ns, CuptiNow());
      KC_RETURN_IF_ERROR(EnqueueTimerCanary(kStream));  // after drained_ns: in no window
      ++result.canaries_launched;
      if (gated) KC_RETURN_IF_ERROR(CountGate(slot, result));
      KC_RETURN_IF_ERROR(persisting_.AfterTimedCall());
      KC_RETURN_IF_ERROR(hooks.AfterTimedCall(fn, index, i));
      windows.push_back(window);
    }
  }
  return windows;
}

StatusOr<BenchmarkResult> CuptiTimer::Run(const BenchmarkOptions& options,
                                          const BenchmarkCall& call, CallHooks& hooks) {
  KC_RETURN_IF_ERROR(ValidateOptions(options));
  BenchmarkResult result;
  result.flush = options.flush;
  KC_RETURN_IF_ERROR(persisting_.Begin());
  KC_RETURN_IF_ERROR(FirstCalls(options, call, hooks).WithContext("first checked call"));
  if (!options.warmup || !options.repeat) {
    KC_ASSIGN_OR_RETURN(result.estimate_ms, EstimateCallMs(options, call, hooks));
  }
  result.warmup = IterationCount(options.warmup, options.warmup_ms, result.estimate_ms, 0);
  result.repeat = IterationCount(options.repeat, options.repeat_ms, result.estimate_ms, 1);
  KC_RETURN_IF_ERROR(WarmUp(result.warmup, options, call, hooks).WithContext("warm-up"));
  KC_RETURN_IF_ERROR(hooks.BeginTimed(result.repeat));

  KC_RETURN_IF_ERROR(collector_.Start());
  AbortOnExit abort_on_exit(collector_);
  KC_ASSIGN_OR_RETURN(std::vector<Window> windows,
                      TimedLoop(result.repeat, options, call, hooks, result));
  KC_RETURN_IF_ERROR(Synchronize());  // the last checks, launched after the last window
  abort_on_exit.Dismiss();
  KC_ASSIGN_OR_RETURN(ActivityRecords records, collector_.Stop());
  result.canaries_seen = records.canaries;

  std::vector<HostWindow> host_windows;
  host_windows.reserve(windows.size());
  for (const Window& w : windows)
    host_windows.push_back(w.host);
  KC_ASSIGN_OR_RETURN(Attribution attribution,
                      AttributeToWindows(std::move(records), host_windows));
  result.functions.resize(options.functions);
  std::vector<std::vector<size_t>> by_fn(options.functions);
  for (size_t i = 0; i < windows.size(); ++i)
    by_fn[windows[i].fn].push_back(i);
  for (int fn = 0; fn < options.functions; ++fn) {
    SampleSet& samples = result.functions[fn];
    for (size_t i : by_fn[fn])
      samples.samples_ms.push_back(attribution.spans_ms[i]);
    samples.activities_stable = StableAmong(attribution, by_fn[fn]);
  }
  std::map<uint32_t, int64_t> kernel_calls;
  for (const std::vector<ActivityIdentity>& identities : attribution.identities) {
    for (const ActivityIdentity& identity : identities) {
      if (identity.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ++kernel_calls[identity.name_id];
    }
  }
  for (const auto& [id, count] : kernel_calls) {
    if (result.kernels.size() == kMaxKernelNames) break;
    result.kernels.emplace_back(collector_.KernelName(id).substr(0, 240), count);
  }
  result.unattributed_activities = attribution.unattributed_activities;
  result.graph_activities = attribution.graph_activities;
  result.empty_windows = attribution.empty_windows;
  result.flags = persisting_.flags();
  return result;
}

}  // namespace kc::native
