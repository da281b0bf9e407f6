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
#include "native/output_tolerance.h"

namespace kc::native {

// Poison written into outputs before each call: all bits set (NaN for floats, -1 for ints).
inline constexpr uint8_t kPoisonByte = 0xFF;

// Adds to *counter the number of elements of `actual` that do not match `expected`.
// Both are contiguous device buffers of `bytes` bytes of `type`.
Status EnqueueCountMismatches(const void* actual, const void* expected, size_t bytes,
                              ElementType type, OutputTolerance tolerance,
                              unsigned long long* counter, cudaStream_t stream);

// How far two calls' outputs lie apart, on the device (output_tolerance.h reads it).
struct SpreadCounters {
  unsigned long long nan_mismatches = 0;  // floats: NaN in one and not in the other
  unsigned long long bit_mismatches = 0;  // other types: elements (32-bit words) that differ
  unsigned int max_abs_diff_bits = 0;     // floats: max |a-e| over both-finite pairs, as float bits
  unsigned int max_abs_expected_bits = 0;  // floats: max |e| over finite e, as float bits
};

// The counters read back, as output_tolerance.h takes them.
ReferenceSpread ToSpread(const SpreadCounters& counters);

// Accumulates into *counters (device memory, zeroed by the caller) how `actual` differs from
// `expected`: both contiguous device buffers of `bytes` bytes of `type`.
Status EnqueueSpread(const void* actual, const void* expected, size_t bytes, ElementType type,
                     SpreadCounters* counters, cudaStream_t stream);

// True for the types compared within a tolerance (float16/32/64, bfloat16).
bool IsFloatingType(ElementType type);

// Adds to *counter the number of bytes of `data` other than `value` (kPoisonByte: bytes a call
// wrote over the poison; 0: bytes a call wrote over zeros).
Status EnqueueCountBytesOtherThan(const void* data, size_t bytes, uint8_t value,
                                  unsigned long long* counter, cudaStream_t stream);

}  // namespace kc::native
