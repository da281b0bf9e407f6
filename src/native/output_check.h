// Device-side output checks of the benchmark's timed calls (docs/benchmark-integrity.md):
// counting, on the GPU and without a host copy, the elements of one call's output that differ
// from the first checked call's output, or that still hold the poison written before the call.
// The counts accumulate into device counters read once after the timed loop, so checking every
// call costs one small kernel per call and no synchronisation of its own.
//
// Floating-point elements (float16/32/64, bfloat16) match within |a-e| <= atol + rtol*|e|, NaN
// matching NaN, so kernels whose rounding varies from call to call (atomics) still pass; every
// other dtype compares bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace kc::native {

// The element type, from DLPack's code and bits (dlpack.h DLDataTypeCode).
struct ElementType {
  uint8_t code = 0;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, ...
  uint8_t bits = 8;
};

struct OutputTolerance {
  float rtol = 1e-3f;
  float atol = 1e-5f;
};

// Poison written into outputs before each call: all bits set (NaN for floats, -1 for ints).
inline constexpr uint8_t kPoisonByte = 0xFF;

// Adds to *counter the number of elements of `actual` that do not match `expected`.
// Both are contiguous device buffers of `bytes` bytes of `type`.
Status EnqueueCountMismatches(const void* actual, const void* expected, size_t bytes,
                              ElementType type, OutputTolerance tolerance,
                              unsigned long long* counter, cudaStream_t stream);

// Adds to *counter the number of bytes of `data` that are not kPoisonByte.
Status EnqueueCountUnpoisoned(const void* data, size_t bytes, unsigned long long* counter,
                              cudaStream_t stream);

}  // namespace kc::native
