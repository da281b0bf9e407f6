#include "native/cupti_timer.h"

#include <cmath>
#include <string>
#include <utility>

#include "native/cuda_status.h"

namespace kc::native {
namespace {

// The legacy default stream: torch's default stream unless the user changed it.
constexpr cudaStream_t kStream = 0;

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
  if (!(estimate_ms > 0)) return kMaxIterations;
  const double derived = std::floor(budget_ms / estimate_ms);  // int() of a non-negative value
  if (!(derived < static_cast<double>(kMaxIterations))) return kMaxIterations;
  return std::max(minimum, static_cast<int64_t>(derived));
}

Status CuptiTimer::MaybeFlush(FlushMode flush) {
  if (flush == FlushMode::kNone) return Status::Ok();
  return flush_.Enqueue(kStream);
}

// `calls` x (flush?, call?) between two events on the legacy stream; ms.
StatusOr<float> CuptiTimer::TimeWithEvents(int calls, FlushMode flush, const BenchmarkCall* call) {
  KC_ASSIGN_OR_RETURN(CudaEvent start, CudaEvent::Create());
  KC_ASSIGN_OR_RETURN(CudaEvent stop, CudaEvent::Create());
  KC_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), kStream));
  for (int i = 0; i < calls; ++i) {
    KC_RETURN_IF_ERROR(MaybeFlush(flush));
    if (call != nullptr) KC_RETURN_IF_ERROR((*call)());
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
StatusOr<double> CuptiTimer::EstimateCallMs(FlushMode flush, const BenchmarkCall& call) {
  KC_RETURN_IF_ERROR(call());             // one untimed call: first-use costs are not the kernel's
  KC_RETURN_IF_ERROR(MaybeFlush(flush));  // allocates the flush buffer on first use
  KC_RETURN_IF_ERROR(Synchronize());
  KC_ASSIGN_OR_RETURN(float with_calls_ms, TimeWithEvents(kEstimateCalls, flush, &call));
  return static_cast<double>(with_calls_ms) / kEstimateCalls;
}

Status CuptiTimer::WarmUp(int64_t count, FlushMode flush, const BenchmarkCall& call) {
  for (int64_t i = 0; i < count; ++i) {
    KC_RETURN_IF_ERROR(MaybeFlush(flush));
    KC_RETURN_IF_ERROR(call());
  }
  return Synchronize();
}

// Each iteration: flush -> sync -> t0 -> call -> t1 -> sync, so the GPU is idle at both ends
// and the flush's memset, launched before t0, is never attributed to the call.
StatusOr<std::vector<HostWindow>> CuptiTimer::TimedLoop(int64_t count, FlushMode flush,
                                                        const BenchmarkCall& call) {
  std::vector<HostWindow> windows;
  windows.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    KC_RETURN_IF_ERROR(MaybeFlush(flush));
    KC_RETURN_IF_ERROR(Synchronize());
    HostWindow window;
    KC_ASSIGN_OR_RETURN(window.begin_ns, CuptiNow());
    KC_RETURN_IF_ERROR(call());
    KC_ASSIGN_OR_RETURN(window.end_ns, CuptiNow());
    KC_RETURN_IF_ERROR(Synchronize().WithContext("timed iteration " + std::to_string(i)));
    windows.push_back(window);
  }
  return windows;
}

StatusOr<BenchmarkResult> CuptiTimer::Run(const BenchmarkOptions& options,
                                          const BenchmarkCall& call) {
  KC_RETURN_IF_ERROR(ValidateOptions(options));
  BenchmarkResult result;
  result.flush = options.flush;
  if (!options.warmup || !options.repeat) {
    KC_ASSIGN_OR_RETURN(result.estimate_ms, EstimateCallMs(options.flush, call));
  }
  result.warmup = IterationCount(options.warmup, options.warmup_ms, result.estimate_ms, 0);
  result.repeat = IterationCount(options.repeat, options.repeat_ms, result.estimate_ms, 1);
  KC_RETURN_IF_ERROR(WarmUp(result.warmup, options.flush, call).WithContext("warm-up"));

  KC_RETURN_IF_ERROR(collector_.Start());
  AbortOnExit abort_on_exit(collector_);
  KC_ASSIGN_OR_RETURN(std::vector<HostWindow> windows,
                      TimedLoop(result.repeat, options.flush, call));
  abort_on_exit.Dismiss();
  KC_ASSIGN_OR_RETURN(ActivityRecords records, collector_.Stop());

  KC_ASSIGN_OR_RETURN(Attribution attribution, AttributeToWindows(std::move(records), windows));
  result.samples_ms = std::move(attribution.spans_ms);
  result.activities_stable = attribution.activities_stable;
  return result;
}

}  // namespace kc::native
