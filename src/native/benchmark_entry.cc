#include "native/benchmark_entry.h"

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "native/activity_collector.h"
#include "native/benchmark_report.h"
#include "native/l2_flush.h"
#include "worker/sealed_result_abi.h"

namespace kc::native {
namespace py = pybind11;
namespace {

worker::SealResultFn g_seal = nullptr;

L2Flush& ProcessL2Flush() {
  static L2Flush* flush = new L2Flush();  // leaked on purpose: CUPTI and the driver outlive us
  return *flush;
}

// The result before sealing: spec keys, our statistics, and what the defences saw.
nlohmann::json BuildResult(const BenchmarkResult& timed, const ArgumentRotation& rotation,
                           const RotationFindings& findings, const BenchmarkRequest& request) {
  const bool paired = timed.functions.size() == 2;
  nlohmann::json result = LatencyJson({timed.functions[0].samples_ms,
                                       timed.functions[0].activities_stable});
  result["flush_l2"] = timed.flush == FlushMode::kBeforeEveryCall;
  result["warmup"] = timed.warmup;
  result["repeat"] = timed.repeat;
  result["timer"] = "cupti";
  nlohmann::json flags = nlohmann::json::array();
  for (const std::string& flag : timed.flags) flags.push_back(flag);
  for (const std::string& flag : findings.flags) flags.push_back(flag);
  if (timed.unattributed_activities > 0) {
    flags.push_back(std::to_string(timed.unattributed_activities) +
                    " device activities in timed calls had no API record in their call (hidden "
                    "records or launches from another thread); they are timed");
  }
  if (paired) {
    result["reference"] = LatencyJson({timed.functions[1].samples_ms,
                                       timed.functions[1].activities_stable});
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
      {"flags", flags},
      {"unattributed_activities", timed.unattributed_activities},
  };
  return result;
}

}  // namespace

Status BindWorker(py::object tensor_type, py::object to_dlpack, py::object from_dlpack) {
  KC_RETURN_IF_ERROR(TorchExchange::Bind(std::move(tensor_type), std::move(to_dlpack),
                                         std::move(from_dlpack)));
  void* seal = PyCapsule_Import(worker::kSealResultCapsule, 0);
  if (seal == nullptr) {
    PyErr_Clear();
    return UnavailableError("kcoral._core cannot seal benchmark results (no " +
                            std::string(worker::kSealResultCapsule) + ")");
  }
  g_seal = reinterpret_cast<worker::SealResultFn>(seal);
  return Status::Ok();
}

StatusOr<py::object> RunBenchmark(const std::vector<py::object>& functions, const py::tuple& args,
                                  const BenchmarkRequest& request, BenchmarkFailure& failure) {
  if (g_seal == nullptr || !TorchExchange::Bound()) {
    return UnavailableError("the benchmark was not bound at worker start (kcoral._native.bind_worker)");
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
  BenchmarkOptions options = request.options;
  options.functions = static_cast<int>(functions.size());
  KC_ASSIGN_OR_RETURN(ActivityCollector * collector, ActivityCollector::Get());
  CuptiTimer timer(*collector, ProcessL2Flush());
  KC_ASSIGN_OR_RETURN(BenchmarkResult timed, timer.Run(options, call, *rotation));
  KC_ASSIGN_OR_RETURN(RotationFindings findings, rotation->Finish());
  if (!findings.failures.empty()) {
    failure.output_check = findings.failures.front();
    return FailedPreconditionError("benchmark output check failed");
  }

  const std::string text = BuildResult(timed, *rotation, findings, request).dump();
  PyObject* sealed = g_seal(text.data(), text.size());
  if (sealed == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(sealed);
}

}  // namespace kc::native
