#include "native/device_check.h"

#include "native/cuda_status.h"

namespace kc::native {

DeviceHealth CheckDevice() {
  DeviceHealth health;
  cudaError_t synchronized = cudaDeviceSynchronize();
  cudaError_t last = cudaGetLastError();
  health.error = synchronized != cudaSuccess ? synchronized : last;
  if (health.error == cudaSuccess) return health;

  health.name = CudaErrorName(health.error);
  const char* text = cudaGetErrorString(health.error);
  health.message = text != nullptr ? text : "unknown CUDA error";
  health.sticky = cudaDeviceSynchronize() != cudaSuccess;
  static_cast<void>(cudaGetLastError());  // leave no stale non-sticky error behind
  return health;
}

}  // namespace kc::native
