// WorkerSettings: what the server tells a worker interpreter's own code when it starts, in the
// start message (ipc/messages.h), instead of environment variables: the device and its mode,
// the worker's memory, the GPU's target, the library cap and the zygote's imports. A worker
// forked by the zygote has its zygote's settings (the zygote's imports were chosen by them).
// Workers read them through kcoral._core.worker_settings() (worker/process_settings.h).
//
// What user code, its children and the CUDA driver must see (CUDA_VISIBLE_DEVICES,
// CUDA_DEVICE_MAX_CONNECTIONS, TVM_FFI_CUDA_ARCH_LIST, OMP/MKL/OPENBLAS_NUM_THREADS) is still
// exported in the worker's environment (server/app.cc, pool/device_workers.cc), not here.
//
// Wire form (Encode; DecodeWorkerSettings reads it back, a missing field taking its default):
//   {"device": "cpu" | "gpu", "cpu_execution": "host" | "reference",
//    "address_space_mbytes": 0, "heap_bytes": 67108864, "gpu_arch": "sm_90a",
//    "max_libraries": 256, "preload"?: ["torch", "numpy"]}
//
// Plain values; Decode never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::ipc {

enum class WorkerDevice { kCpu, kGpu };
// CPU workers: run uploaded tensors and libraries on the host, or refuse them as the reference
// server does (kcoral server --cpu-execution).
enum class CpuExecution { kHost, kReference };

struct WorkerSettings {
  WorkerDevice device = WorkerDevice::kCpu;
  CpuExecution cpu_execution = CpuExecution::kHost;
  // The address-space cap of a CPU worker (worker/resource_limits.h); 0: none. GPU workers get
  // none: CUDA reserves far more than it uses.
  uint64_t address_space_mbytes = 0;
  uint64_t heap_bytes = 0;  // faulted in before ready (worker/warm_heap.h, --worker-heap-mbytes)
  std::string gpu_arch;     // the GPU's target ("sm_90a") the worker describes; empty on CPU
  // Uploaded libraries a reused worker may hold before it is retired (docs/data-path.md).
  uint64_t max_libraries = 256;
  // Modules the zygote imports before it forks (KCORAL_PRELOAD on the server); nullopt: its
  // device's default.
  std::optional<std::vector<std::string>> preload;
};

// "cpu", "gpu"; "host", "reference": the texts Python's code compares against.
std::string_view TextOf(WorkerDevice device);
std::string_view TextOf(CpuExecution execution);

nlohmann::json Encode(const WorkerSettings& settings);
// kInvalidArgument naming the field for a field of the wrong type or an unknown text.
StatusOr<WorkerSettings> DecodeWorkerSettings(const nlohmann::json& json);

}  // namespace kc::ipc
