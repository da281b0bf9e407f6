// RunBenchmark: the whole GPU `benchmark` / `benchmark_paired` behind kcoral._native: the
// argument rotation, the CUPTI timer, the GPU-state and side-channel checks, the statistics,
// and the hand-off to kcoral._core, which seals the result (base/sealed_result_abi.h).
// Nothing of the timing passes through Python on the way (docs/benchmark-integrity.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "base/status.h"
#include "native/argument_rotation.h"  // RotationPlan
#include "native/cupti_timer.h"
#include "native/returned_outputs.h"  // ReturnDeclarations

namespace kc::native {

struct BenchmarkRequest {
  BenchmarkOptions options;
  RotationPlan rotation;
  ReturnDeclarations returns;
};

// Binds what user code must not be able to replace, once, before any upload runs: torch's
// DLPack exchange (dlpack_tensor.h) and _core's sealing capsule.
Status BindWorker(pybind11::object tensor_type, pybind11::object to_dlpack,
                  pybind11::object from_dlpack);

// Once per worker, while it is prepared (house-keeping, outside any lease): CUPTI's activity
// API initialised and the L2 flush buffer allocated and touched, so that a worker's first
// benchmark does not pay for them (~70 ms on the H200) inside its timing span.
Status PrepareTimer();

// What went wrong besides a Status: the callable's own exception, or a failed output check.
struct BenchmarkFailure {
  std::optional<pybind11::error_already_set> raised;  // status is then kCancelled
  std::optional<std::string> output_check;            // status is then kFailedPrecondition
};

// Times `functions` (1, or 2 for candidate and reference) over `args`. Status codes:
// kInvalidArgument for a bad cfg, kUnavailable when CUPTI or the GPU is unusable, others for
// CUDA errors and the failures above.
StatusOr<pybind11::object> RunBenchmark(const std::vector<pybind11::object>& functions,
                                        const pybind11::tuple& args,
                                        const BenchmarkRequest& request, BenchmarkFailure& failure);

}  // namespace kc::native
