// CheckDevice: the end-of-request health check of a GPU worker (spec/protocol.md §2.6 "final
// sync and reset"). A sticky error (one that a second synchronize still reports, such as
// cudaErrorIllegalAddress) poisons the CUDA context: the worker must then be retired.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

namespace kc::native {

struct DeviceHealth {
  cudaError_t error = cudaSuccess;  // first error seen; cudaSuccess when healthy
  std::string name;                 // "cudaErrorIllegalAddress"
  std::string message;              // cudaGetErrorString
  bool sticky = false;
};

// cudaDeviceSynchronize, then cudaGetLastError (which clears a non-sticky error); on an error,
// a second synchronize decides stickiness. Blocks until the device is idle.
DeviceHealth CheckDevice();

}  // namespace kc::native
