// Element-wise access to a strided tensor on the device, for the benchmark's checks of outputs
// that are not contiguous (a returned view of a larger buffer, a transposed result): gathered
// into a contiguous buffer they are compared like any other output, and poison is written into
// their elements only, never into the rest of the storage they view (which may hold the
// program's own state, a KV cache say).
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace kc::native {

// The most dimensions a strided tensor may have here (DLPack allows more; torch rarely does).
inline constexpr int kMaxStridedDims = 8;

// Copies the elements of `tensor` (a CUDA tensor, any non-negative strides, elements of 1, 2, 4,
// 8 or 16 bytes) into `contiguous`, row-major. kInvalidArgument for what it cannot walk.
Status EnqueueGather(const DLTensor& tensor, void* contiguous, cudaStream_t stream);

// Sets every byte of every element of `tensor` to `value`; bytes between elements are left.
Status EnqueueStridedFill(const DLTensor& tensor, unsigned char value, cudaStream_t stream);

// Whether EnqueueGather and EnqueueStridedFill can walk `tensor`.
bool CanWalk(const DLTensor& tensor);

}  // namespace kc::native
