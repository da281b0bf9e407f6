// CUDA and CUPTI return codes as kc::Status (STYLE.md §3, "CUDA/CUPTI" row).
//
// Code choice, by what the caller should do:
//   - CUPTI failures                         -> kUnavailable (no trustworthy timer here)
//   - CUDA "no device / driver" failures     -> kUnavailable (the worker has no usable GPU)
//   - every other CUDA error                 -> kFailedPrecondition (the device or the user's
//                                               call is in an error state; the message starts
//                                               with the cudaError name, e.g.
//                                               "cudaErrorIllegalAddress: ...")
//
// Usage:
//   KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
//   KC_CUPTI_RETURN_IF_ERROR(cuptiActivityFlushAll(0));
#pragma once

#include <cuda_runtime_api.h>
#include <cupti.h>

#include "base/status.h"

namespace kc::native {

// `expression` is the call text; file and line say where it was made.
Status CudaStatus(cudaError_t error, const char* expression, const char* file, int line);
Status CuptiStatus(CUptiResult result, const char* expression, const char* file, int line);

// "cudaErrorIllegalAddress" and the like; never null.
const char* CudaErrorName(cudaError_t error);

}  // namespace kc::native

#define KC_CUDA_RETURN_IF_ERROR(expr)                                             \
  do {                                                                            \
    cudaError_t kc_cuda_error_ = (expr);                                          \
    if (kc_cuda_error_ != cudaSuccess) {                                          \
      return ::kc::native::CudaStatus(kc_cuda_error_, #expr, __FILE__, __LINE__); \
    }                                                                             \
  } while (false)

#define KC_CUPTI_RETURN_IF_ERROR(expr)                                               \
  do {                                                                               \
    CUptiResult kc_cupti_result_ = (expr);                                           \
    if (kc_cupti_result_ != CUPTI_SUCCESS) {                                         \
      return ::kc::native::CuptiStatus(kc_cupti_result_, #expr, __FILE__, __LINE__); \
    }                                                                                \
  } while (false)
