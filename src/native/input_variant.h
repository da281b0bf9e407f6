// The second set of input values a benchmark checks its calls on (argument_rotation.h): the
// caller's floating-point values reversed element by element and scaled by 3/4.
//
// A result that comes from a cache (keyed on a pointer, a shape, a version counter, or a CUDA
// graph that copies a precomputed answer) is the same for both sets, while a computation gives
// another result: reversal changes what depends on position, scaling what is invariant under
// permutation (sums, sorts, maxima). Both keep the values finite and their range alike (a
// product by 3/4 is exact but for subnormals), and neither changes a dtype, shape or stride.
// Integer and boolean tensors (indices, masks, lengths) keep their values: a new index could
// fall out of range.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "base/status.h"
#include "native/output_tolerance.h"

namespace kc::native {

// True for the element types that get a variant: float16, bfloat16, float32, float64.
bool HasFreshVariant(ElementType type);

inline constexpr float kFreshScale = 0.75f;

// out[i] = in[n - 1 - i] * scale over the n elements of `bytes` bytes of `type`
// (HasFreshVariant); the product is taken in float (double for double), then rounded.
Status EnqueueReversedScaled(const void* in, void* out, size_t bytes, ElementType type, float scale,
                             cudaStream_t stream);
// The fresh variant: EnqueueReversedScaled by 3/4.
Status EnqueueFreshVariant(const void* in, void* out, size_t bytes, ElementType type,
                           cudaStream_t stream);

}  // namespace kc::native
