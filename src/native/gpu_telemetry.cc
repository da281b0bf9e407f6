#include "native/gpu_telemetry.h"

#include <string>

#include <cuda_runtime_api.h>

#include "base/nvml_library.h"
#include "native/cuda_status.h"
#include "native/nvml_snapshot.h"

namespace kc::native {

StatusOr<GpuSnapshot> ReadGpuSnapshot(int cuda_device) {
  KC_ASSIGN_OR_RETURN(const NvmlLibrary* nvml, NvmlLibrary::Get());
  char bus_id[32] = {};
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, cuda_device));
  StatusOr<GpuSnapshot> snapshot = ReadNvmlSnapshot(*nvml, bus_id);
  if (!snapshot.ok()) {
    return snapshot.status().WithContext("CUDA device " + std::to_string(cuda_device));
  }
  snapshot->cuda_device = cuda_device;
  return snapshot;
}

}  // namespace kc::native
