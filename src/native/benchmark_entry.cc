#include "native/benchmark_entry.h"

#include <chrono>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/sealed_result_abi.h"
#include "native/activity_collector.h"
#include "native/benchmark_report.h"
#include "native/checked_calls.h"
#include "native/cuda_status.h"
#include "native/gpu_telemetry.h"
#include "native/l2_flush.h"
#include "native/persisting_l2.h"
#include "native/physical_floor.h"
#include "native/process_scan.h"
#include "native/span_findings.h"
#include "native/symbol_watch.h"
#include "native/unseen_values.h"

namespace kc::native {
namespace py = pybind11;
namespace {

SealResultFn g_seal = nullptr;

// Issue 40: the timer's CUPTI, driver and runtime entry points and this module's GOT slots for
// them, recorded by BindWorker (before any upload) and checked after every timed span.
SymbolWatch g_timer_watch;

L2Flush& ProcessL2Flush() {
  static L2Flush* flush = new L2Flush();  // leaked on purpose: CUPTI and the driver outlive us
  return *flush;
}

// The current device's peak memory bandwidth (DDR: two transfers a clock); 0 when unknown.
double PeakMemoryBytesPerSecond() {
  int device = 0;
  int clock_khz = 0;
  int bus_bits = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return 0;
  }
  return 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
}

// What the GPU and the worker's PID namespace looked like at one end of the timed loop.
struct Readings {
  std::optional<GpuSnapshot> gpu;
  std::string gpu_error;
  ProcessScan processes;
};

Readings Read() {
  Readings readings;
  int device = 0;
  if (cudaGetDevice(&device) == cudaSuccess) {
    StatusOr<GpuSnapshot> gpu = ReadGpuSnapshot(device);
    if (gpu.ok()) {
      readings.gpu = std::move(gpu).value();
    } else {
      readings.gpu_error = gpu.status().message();
    }
  }
  readings.processes = ScanNamespaceProcesses();
  return readings;
}

// After the timed loop: pairs of drained, cold-L2 calls of `function` on set 1, alternating
// values the probes showed it (the fresh variant) and values never given before, timed on the
// host (unseen_values.h). A call that raises ends the pairs.
StatusOr<UnseenValuesTiming> TimeOnUnseenValues(CheckedCalls& checked, const py::object& function,
                                                int pairs) {
  UnseenValuesTiming timing;
  for (int k = 0; k < pairs && !timing.raised; ++k) {
    for (const bool unseen : {k % 2 == 1, k % 2 == 0}) {  // ABBA: drift falls on both sides
      KC_RETURN_IF_ERROR(
          checked.PrepareVariedSet(unseen ? std::optional(UnseenScale(k)) : std::nullopt));
      KC_RETURN_IF_ERROR(ProcessL2Flush().Enqueue(nullptr));
      KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      const auto started = std::chrono::steady_clock::now();
      py::object value;
      try {
        value = function(*checked.Arguments(1));
      } catch (py::error_already_set&) {
        timing.raised = true;
        break;
      }
      KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - started;
      (unseen ? timing.unseen_ms : timing.seen_ms).push_back(took.count());
      if (!unseen) continue;
      // Reversed at scale 1, a sort's answer is the caller's: only scaled values are judged.
      checked.Hold(0, std::move(value));
      KC_ASSIGN_OR_RETURN(const bool stale, checked.AnsweredNewValuesAsCaller(0));
      if (stale && UnseenScale(k) < 1) ++timing.answered_as_caller;
    }
  }
  return timing;
}

// The rotation's hooks, plus the readings at the start of the timed loop.
class WatchedHooks final : public CallHooks {
 public:
  explicit WatchedHooks(CallHooks& inner) : inner_(inner) {}
  Status BeforeCall(int fn, int64_t call) override { return inner_.BeforeCall(fn, call); }
  Status AfterFirstCall(int fn, int64_t call) override { return inner_.AfterFirstCall(fn, call); }
  bool WantsSpreadCall(int fn) override { return inner_.WantsSpreadCall(fn); }
  Status BeginTimed(int64_t repeat) override {
    start_ = Read();
    return inner_.BeginTimed(repeat);
  }
  Status AfterTimedCall(int fn, int64_t call, int64_t slot) override {
    return inner_.AfterTimedCall(fn, call, slot);
  }
  const Readings& start() const { return start_; }

 private:
  CallHooks& inner_;
  Readings start_;
};

// integrity.gpu and integrity.processes; what they show goes to `found`.
void AddReadings(const Readings& start, const Readings& end, nlohmann::json& integrity,
                 SpanFindings& found) {
  nlohmann::json gpu = nlohmann::json::object();
  if (start.gpu && end.gpu) {
    gpu = {{"uuid", start.gpu->uuid},
           {"name", start.gpu->name},
           {"driver_version", start.gpu->driver_version},
           {"start", ToJson(*start.gpu)},
           {"end", ToJson(*end.gpu)}};
    AddClockFindings(*start.gpu, *end.gpu, found);
  } else {
    gpu["unavailable"] = start.gpu_error.empty() ? end.gpu_error : start.gpu_error;
  }
  integrity["gpu"] = gpu;
  integrity["processes"] = {{"start", ToJson(start.processes)}, {"end", ToJson(end.processes)}};
  AddProcessFindings(start.processes, "at the start of", found);
  AddProcessFindings(end.processes, "at the end of", found);
}

// The cfg keys that loosen a check or change what is measured, with their values: a grader can
// reject a candidate that loosened its own judge.
nlohmann::json Loosened(const BenchmarkRequest& request) {
  nlohmann::json loosened = nlohmann::json::object();
  if (!request.rotation.rotate) loosened["rotate_inputs"] = false;
  if (request.rotation.outputs) loosened["outputs"] = *request.rotation.outputs;
  if (request.rotation.tolerance) {
    loosened["tolerance"] = {{"rtol", request.rotation.tolerance->rtol},
                             {"atol", request.rotation.tolerance->atol}};
  }
  if (request.options.flush == FlushMode::kNone) loosened["flush_l2"] = false;
  if (!request.options.launch_gate) loosened["launch_gate"] = false;
  return loosened;
}

// The result before sealing: spec keys, our statistics, and what the defences saw.
nlohmann::json BuildResult(const BenchmarkResult& timed, const BenchmarkRequest& request,
                           const CheckedCalls& checked, const CheckFindings& findings,
                           const std::optional<UnseenValuesTiming>& unseen, const Readings& start,
                           const Readings& end) {
  const bool paired = timed.functions.size() == 2;
  nlohmann::json result =
      LatencyJson({timed.functions[0].samples_ms, timed.functions[0].activities_stable});
  result["flush_l2"] = timed.flush == FlushMode::kBeforeEveryCall;
  result["warmup"] = timed.warmup;
  result["repeat"] = timed.repeat;
  result["timer"] = "cupti";
  SpanFindings found;
  found.flags = timed.flags;
  for (const std::string& flag : findings.flags)
    found.flags.push_back(flag);
  if (timed.unattributed_activities > 0) {
    found.flags.push_back(std::to_string(timed.unattributed_activities) +
                          " device activities in timed calls had no API record in their call "
                          "(hidden records or launches from another thread); they are timed");
  }
  if (timed.canaries_seen < timed.canaries_launched) {
    found.flags.push_back(
        std::to_string(timed.canaries_launched - timed.canaries_seen) + " of the timer's " +
        std::to_string(timed.canaries_launched) +
        " canary kernels left no CUPTI record: activity recording was switched off or torn down "
        "from inside the timed calls (cuptiActivityDisable, cuptiFinalize, cuptiUnsubscribe, a "
        "rewritten libcupti), so the samples do not show the work");
  }
  const nlohmann::json floor =
      ApplyPhysicalFloor({.bytes_changed = checked.BytesChanged(0),
                          .checked_bytes = checked.CheckedBytes(0),
                          .peak_bytes_per_second = PeakMemoryBytesPerSecond(),
                          .median_ms = result["latency_ms_median"].get<double>(),
                          .empty_windows = timed.empty_windows},
                         found);
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& [name, count] : timed.kernels)
    kernels.push_back({{"name", name}, {"calls", count}});
  if (!timed.gate_note.empty()) found.conditions.push_back(timed.gate_note);
  if (paired) {
    result["reference"] =
        LatencyJson({timed.functions[1].samples_ms, timed.functions[1].activities_stable});
    RatioInterval ratio = PairedRatio(timed.functions[0].samples_ms, timed.functions[1].samples_ms);
    result["ratio_median"] = ratio.median;
    result["ratio_ci95_low"] = ratio.low;
    result["ratio_ci95_high"] = ratio.high;
    result["speedup_median"] = 1.0 / ratio.median;
    const uint64_t cross = checked.cross_mismatches();
    result["outputs_match_reference"] = cross == 0;
    if (cross != 0) {
      found.flags.push_back("the candidate's outputs differ from the reference's in " +
                            std::to_string(cross) + " elements");
    }
  }
  result["integrity"] = {
      {"defences",
       {{"timer", "CUPTI activity records, statistics in C++"},
        {"attribution", "by correlation id and by device time"},
        {"launch_gate",
         {{"enabled", request.options.launch_gate},
          {"gated_calls", timed.gated_calls},
          {"timeouts", timed.gate_timeouts}}},
        {"l2_flush", result["flush_l2"]},
        {"persisting_l2_reset", true},
        {"arguments", checked.DescribeArguments()},
        {"returned", checked.DescribeReturned()},
        {"output_check", checked.DescribeOutputCheck()},
        {"outputs_poisoned_and_checked", true}}},
      {"unattributed_activities", timed.unattributed_activities},
      {"floor", floor},
      {"kernels", kernels},
      {"canaries", {{"launched", timed.canaries_launched}, {"seen", timed.canaries_seen}}},
      {"graph_activities", timed.graph_activities},
      {"outputs_unchecked", findings.unchecked},
      {"loosened", Loosened(request)},
  };
  nlohmann::json& guard = result["integrity"]["defences"]["timer_guard"];
  guard = g_timer_watch.Describe();
  guard["tracer_pid"] = TracerPid();
  if (unseen) {
    result["integrity"]["defences"]["unseen_values"] = JudgeUnseenValues(*unseen, found);
  }
  AddReadings(start, end, result["integrity"], found);
  result["integrity"]["flags"] = found.flags;
  result["integrity"]["conditions"] = found.conditions;
  return result;
}

}  // namespace

Status BindWorker(py::object tensor_type, py::object to_dlpack, py::object from_dlpack) {
  KC_RETURN_IF_ERROR(PersistingL2Guard::RecordBaseline());  // libcuda is loaded from here on
  if (g_timer_watch.empty()) {  // once: a second bind from user code must not record its patches
    g_timer_watch.RecordCode(TimerSymbols(), TimerLibraries());
    g_timer_watch.RecordGot(reinterpret_cast<const void*>(&BindWorker), TimerSymbols());
  }
  if (!TorchExchange::ExporterBound()) {  // kcoral.builtins binds it when torch came first
    KC_RETURN_IF_ERROR(TorchExchange::BindExporter(std::move(tensor_type), std::move(to_dlpack)));
  }
  KC_RETURN_IF_ERROR(TorchExchange::BindImporter(std::move(from_dlpack)));
  void* seal = PyCapsule_Import(kSealResultCapsule, 0);
  if (seal == nullptr) {
    PyErr_Clear();
    return UnavailableError("kcoral._core cannot seal benchmark results (no " +
                            std::string(kSealResultCapsule) + ")");
  }
  g_seal = reinterpret_cast<SealResultFn>(seal);
  return Status::Ok();
}

Status PrepareTimer() {
  KC_ASSIGN_OR_RETURN(ActivityCollector * collector, ActivityCollector::Get());
  KC_RETURN_IF_ERROR(collector->Start());
  collector->Abort();  // nothing was recorded; only CUPTI's first enable mattered
  KC_RETURN_IF_ERROR(ProcessL2Flush().Enqueue(nullptr));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(nullptr));
  return Status::Ok();
}

StatusOr<py::object> RunBenchmark(const std::vector<py::object>& functions, const py::tuple& args,
                                  const BenchmarkRequest& request, BenchmarkFailure& failure) {
  if (g_seal == nullptr || !TorchExchange::Bound()) {
    return UnavailableError(
        "the benchmark was not bound at worker start (kcoral._native.bind_worker)");
  }
  RotationPlan plan = request.rotation;
  KC_ASSIGN_OR_RETURN(size_t l2_bytes, CurrentDeviceL2Bytes());
  // Cold-L2 runs rotate through twice the L2; hot ones (flush_l2 false) keep two sets, so
  // that the inputs can stay in L2 as the caller asked.
  plan.target_bytes = request.options.flush == FlushMode::kBeforeEveryCall ? 2 * l2_bytes : 0;
  KC_ASSIGN_OR_RETURN(
      std::unique_ptr<CheckedCalls> checked,
      CheckedCalls::Create(args, plan, request.returns, static_cast<int>(functions.size())));

  // The callables run with the GIL held (this thread never releases it here). An exception is
  // kept on this side and re-raised by the caller once the timer has cleaned up. Inside a call
  // only its return value is kept: the checks run after the call's window.
  BenchmarkCall call = [&](int fn, int64_t index) -> Status {
    try {
      checked->Hold(fn, functions[fn](*checked->Arguments(index)));
      return Status::Ok();
    } catch (py::error_already_set& error) {
      failure.raised.emplace(std::move(error));
      return Status(StatusCode::kCancelled, "the benchmarked callable raised");
    }
  };
  // A probe from zeros that raises decides nothing; its exception is dropped.
  ProbeCalls probes{[&](int fn, int set) { return call(fn, set); },
                    [&](int fn, int set) -> StatusOr<bool> {
                      try {
                        checked->Hold(fn, functions[fn](*checked->Arguments(set)));
                        return true;
                      } catch (py::error_already_set&) {
                        return false;
                      }
                    }};
  KC_RETURN_IF_ERROR(checked->Settle(probes).WithContext("the reference calls"));
  BenchmarkOptions options = request.options;
  options.functions = static_cast<int>(functions.size());
  KC_ASSIGN_OR_RETURN(ActivityCollector * collector, ActivityCollector::Get());
  CuptiTimer timer(*collector, ProcessL2Flush());
  WatchedHooks hooks(*checked);
  KC_ASSIGN_OR_RETURN(BenchmarkResult timed, timer.Run(options, call, hooks));
  for (std::string& rewrite : g_timer_watch.Check())
    timed.flags.push_back(std::move(rewrite));
  const Readings end = Read();
  KC_ASSIGN_OR_RETURN(CheckFindings findings, checked->Finish(timed.graph_activities));
  if (!findings.failures.empty()) {
    failure.output_check = findings.failures.front();
    return FailedPreconditionError("benchmark output check failed");
  }

  // A cache kept by the values' contents agrees with every check above (unseen_values.h).
  std::optional<UnseenValuesTiming> unseen;
  if (checked->CanVaryAnew()) {
    const int pairs =
        UnseenPairs(MedianMs(timed.functions[0].samples_ms), request.options.repeat_ms);
    KC_ASSIGN_OR_RETURN(unseen, TimeOnUnseenValues(*checked, functions[0], pairs));
  }
  const std::string text =
      BuildResult(timed, request, *checked, findings, unseen, hooks.start(), end).dump();
  PyObject* sealed = g_seal(text.data(), text.size());
  if (sealed == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(sealed);
}

}  // namespace kc::native
