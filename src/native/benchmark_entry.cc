#include "native/benchmark_entry.h"

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "native/activity_collector.h"
#include "native/benchmark_report.h"
#include "native/clock_events.h"
#include "native/cuda_status.h"
#include "native/gpu_telemetry.h"
#include "native/l2_flush.h"
#include "native/persisting_l2.h"
#include "native/process_scan.h"
#include "worker/sealed_result_abi.h"

namespace kc::native {
namespace py = pybind11;
namespace {

worker::SealResultFn g_seal = nullptr;

L2Flush& ProcessL2Flush() {
  static L2Flush* flush = new L2Flush();  // leaked on purpose: CUPTI and the driver outlive us
  return *flush;
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

// The rotation's hooks, plus the readings at the start of the timed loop.
class WatchedHooks final : public CallHooks {
 public:
  explicit WatchedHooks(CallHooks& inner) : inner_(inner) {}
  Status BeforeCall(int fn, int64_t call) override { return inner_.BeforeCall(fn, call); }
  Status AfterFirstCall(int fn, int64_t call) override { return inner_.AfterFirstCall(fn, call); }
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

void AddProcessFlags(const ProcessScan& scan, const char* when, nlohmann::json& flags) {
  for (const OtherProcess& p : scan.processes) {
    std::string holds = !p.holds_gpu   ? "may hold the GPU (its descriptors are hidden)"
                        : *p.holds_gpu ? "holds the GPU"
                                       : "does not hold the GPU";
    flags.push_back("another process ran in the worker's namespace " + std::string(when) +
                    " the timed calls: pid " + std::to_string(p.pid) + " (" + p.comm + "), " +
                    holds);
  }
}

// integrity.gpu and integrity.processes, with their flags.
void AddReadings(const Readings& start, const Readings& end, nlohmann::json& integrity,
                 nlohmann::json& flags) {
  nlohmann::json gpu = nlohmann::json::object();
  if (start.gpu && end.gpu) {
    gpu = {{"uuid", start.gpu->uuid},
           {"name", start.gpu->name},
           {"driver_version", start.gpu->driver_version},
           {"start", ToJson(*start.gpu)},
           {"end", ToJson(*end.gpu)}};
    for (const std::string& flag : ClockFlags(*start.gpu, *end.gpu))
      flags.push_back(flag);
  } else {
    gpu["unavailable"] = start.gpu_error.empty() ? end.gpu_error : start.gpu_error;
  }
  integrity["gpu"] = gpu;
  integrity["processes"] = {{"start", ToJson(start.processes)}, {"end", ToJson(end.processes)}};
  if (!start.processes.meaningful) return;  // said in processes.start.reason_if_not
  AddProcessFlags(start.processes, "at the start of", flags);
  AddProcessFlags(end.processes, "at the end of", flags);
}

// The result before sealing: spec keys, our statistics, and what the defences saw.
nlohmann::json BuildResult(const BenchmarkResult& timed, const ArgumentRotation& rotation,
                           const RotationFindings& findings, const Readings& start,
                           const Readings& end) {
  const bool paired = timed.functions.size() == 2;
  nlohmann::json result =
      LatencyJson({timed.functions[0].samples_ms, timed.functions[0].activities_stable});
  result["flush_l2"] = timed.flush == FlushMode::kBeforeEveryCall;
  result["warmup"] = timed.warmup;
  result["repeat"] = timed.repeat;
  result["timer"] = "cupti";
  nlohmann::json flags = nlohmann::json::array();
  for (const std::string& flag : timed.flags)
    flags.push_back(flag);
  for (const std::string& flag : findings.flags)
    flags.push_back(flag);
  if (timed.unattributed_activities > 0) {
    flags.push_back(std::to_string(timed.unattributed_activities) +
                    " device activities in timed calls had no API record in their call (hidden "
                    "records or launches from another thread); they are timed");
  }
  if (paired) {
    result["reference"] =
        LatencyJson({timed.functions[1].samples_ms, timed.functions[1].activities_stable});
    RatioInterval ratio = PairedRatio(timed.functions[0].samples_ms, timed.functions[1].samples_ms);
    result["ratio_median"] = ratio.median;
    result["ratio_ci95_low"] = ratio.low;
    result["ratio_ci95_high"] = ratio.high;
    result["speedup_median"] = 1.0 / ratio.median;
    result["outputs_match_reference"] = findings.cross_mismatches.value_or(0) == 0;
    if (findings.cross_mismatches.value_or(0) != 0) {
      flags.push_back("the candidate's first output differs from the reference's in " +
                      std::to_string(*findings.cross_mismatches) + " elements");
    }
  }
  result["integrity"] = {
      {"defences",
       {{"timer", "CUPTI activity records, statistics in C++"},
        {"attribution", "by correlation id and by device time"},
        {"l2_flush", result["flush_l2"]},
        {"persisting_l2_reset", true},
        {"arguments", rotation.Describe()},
        {"outputs_poisoned_and_checked", true}}},
      {"unattributed_activities", timed.unattributed_activities},
  };
  AddReadings(start, end, result["integrity"], flags);
  result["integrity"]["flags"] = flags;
  return result;
}

}  // namespace

Status BindWorker(py::object tensor_type, py::object to_dlpack, py::object from_dlpack) {
  KC_RETURN_IF_ERROR(PersistingL2Guard::RecordBaseline());
  if (!TorchExchange::ExporterBound()) {  // kcoral.builtins binds it when torch came first
    KC_RETURN_IF_ERROR(TorchExchange::BindExporter(std::move(tensor_type), std::move(to_dlpack)));
  }
  KC_RETURN_IF_ERROR(TorchExchange::BindImporter(std::move(from_dlpack)));
  void* seal = PyCapsule_Import(worker::kSealResultCapsule, 0);
  if (seal == nullptr) {
    PyErr_Clear();
    return UnavailableError("kcoral._core cannot seal benchmark results (no " +
                            std::string(worker::kSealResultCapsule) + ")");
  }
  g_seal = reinterpret_cast<worker::SealResultFn>(seal);
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
  KC_ASSIGN_OR_RETURN(std::unique_ptr<ArgumentRotation> rotation,
                      ArgumentRotation::Create(args, plan, static_cast<int>(functions.size())));

  // The callables run with the GIL held (this thread never releases it here). An exception is
  // kept on this side and re-raised by the caller once the timer has cleaned up.
  BenchmarkCall call = [&](int fn, int64_t index) -> Status {
    try {
      functions[fn](*rotation->Arguments(index));
      return Status::Ok();
    } catch (py::error_already_set& error) {
      failure.raised.emplace(std::move(error));
      return Status(StatusCode::kCancelled, "the benchmarked callable raised");
    }
  };
  KC_RETURN_IF_ERROR(rotation->SettleOutputs([&] { return call(0, 0); }));
  BenchmarkOptions options = request.options;
  options.functions = static_cast<int>(functions.size());
  KC_ASSIGN_OR_RETURN(ActivityCollector * collector, ActivityCollector::Get());
  CuptiTimer timer(*collector, ProcessL2Flush());
  WatchedHooks hooks(*rotation);
  KC_ASSIGN_OR_RETURN(BenchmarkResult timed, timer.Run(options, call, hooks));
  const Readings end = Read();
  KC_ASSIGN_OR_RETURN(RotationFindings findings, rotation->Finish());
  if (!findings.failures.empty()) {
    failure.output_check = findings.failures.front();
    return FailedPreconditionError("benchmark output check failed");
  }

  const std::string text = BuildResult(timed, *rotation, findings, hooks.start(), end).dump();
  PyObject* sealed = g_seal(text.data(), text.size());
  if (sealed == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(sealed);
}

}  // namespace kc::native
