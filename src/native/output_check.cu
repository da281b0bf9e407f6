#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "native/cuda_status.h"
#include "native/output_check.h"

namespace kc::native {
namespace {

constexpr int kThreads = 256;
constexpr uint8_t kFloat = 2, kBfloat = 4;  // DLDataTypeCode
constexpr int kMaxBlocks = 1024;  // grid-stride: enough to fill an H200, bounded for tiny outputs

__device__ float AsFloat(__half v) {
  return __half2float(v);
}
__device__ float AsFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ double AsDouble(float v) {
  return v;
}
__device__ double AsDouble(double v) {
  return v;
}

template <typename T>
__device__ bool Close(T a, T e, float rtol, float atol) {
  double x = AsDouble(a);
  double y = AsDouble(e);
  if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
  if (x == y) return true;  // equal infinities
  return fabs(x - y) <= atol + rtol * fabs(y);
}

template <>
__device__ bool Close(__half a, __half e, float rtol, float atol) {
  return Close(AsFloat(a), AsFloat(e), rtol, atol);
}

template <>
__device__ bool Close(__nv_bfloat16 a, __nv_bfloat16 e, float rtol, float atol) {
  return Close(AsFloat(a), AsFloat(e), rtol, atol);
}

// One block-wide sum, then one atomic per block.
__device__ void AddBlockCount(unsigned long long mine, unsigned long long* counter) {
  __shared__ unsigned long long total;
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  if (mine != 0) atomicAdd(&total, mine);
  __syncthreads();
  if (threadIdx.x == 0 && total != 0) atomicAdd(counter, total);
}

template <typename T>
__global__ void CountNotClose(const T* actual, const T* expected, size_t n, float rtol, float atol,
                              unsigned long long* counter) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    if (!Close(actual[i], expected[i], rtol, atol)) ++mine;
  }
  AddBlockCount(mine, counter);
}

template <typename T>
__global__ void CountNotEqual(const T* actual, const T* expected, size_t n,
                              unsigned long long* counter) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    if (actual[i] != expected[i]) ++mine;
  }
  AddBlockCount(mine, counter);
}

__global__ void CountNotByte(const uint8_t* data, size_t n, uint8_t value,
                             unsigned long long* counter) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    if (data[i] != value) ++mine;
  }
  AddBlockCount(mine, counter);
}

__device__ unsigned AsBits(float v) {
  return __float_as_uint(v);  // for v >= 0 the bits order as the values do
}

// One block-wide reduction of a thread's spread figures, then one atomic each per block.
__device__ void AddBlockSpread(unsigned long long nan_mismatches, float max_diff,
                               float max_expected, SpreadCounters* counters) {
  __shared__ unsigned long long nans;
  __shared__ unsigned diff_bits;
  __shared__ unsigned expected_bits;
  if (threadIdx.x == 0) nans = 0, diff_bits = 0, expected_bits = 0;
  __syncthreads();
  if (nan_mismatches != 0) atomicAdd(&nans, nan_mismatches);
  if (max_diff > 0) atomicMax(&diff_bits, AsBits(max_diff));
  if (max_expected > 0) atomicMax(&expected_bits, AsBits(max_expected));
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (nans != 0) atomicAdd(&counters->nan_mismatches, nans);
  if (diff_bits != 0) atomicMax(&counters->max_abs_diff_bits, diff_bits);
  if (expected_bits != 0) atomicMax(&counters->max_abs_expected_bits, expected_bits);
}

template <typename T>
__device__ double Widened(T v) {
  return AsDouble(v);
}
template <>
__device__ double Widened(__half v) {
  return AsFloat(v);
}
template <>
__device__ double Widened(__nv_bfloat16 v) {
  return AsFloat(v);
}

template <typename T>
__global__ void FloatSpread(const T* actual, const T* expected, size_t n,
                            SpreadCounters* counters) {
  unsigned long long nans = 0;
  float max_diff = 0;
  float max_expected = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const double a = Widened(actual[i]);
    const double e = Widened(expected[i]);
    if (isnan(a) || isnan(e)) {
      nans += isnan(a) != isnan(e);
      continue;
    }
    if (isfinite(e)) max_expected = fmaxf(max_expected, static_cast<float>(fabs(e)));
    if (a == e) continue;                                         // equal infinities too
    max_diff = fmaxf(max_diff, static_cast<float>(fabs(a - e)));  // inf when one is infinite
  }
  AddBlockSpread(nans, max_diff, max_expected, counters);
}

unsigned Blocks(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? (blocks == 0 ? 1 : blocks) : kMaxBlocks);
}

template <typename T>
void LaunchClose(const void* a, const void* e, size_t bytes, OutputTolerance t,
                 unsigned long long* counter, cudaStream_t stream) {
  size_t n = bytes / sizeof(T);
  CountNotClose<T><<<Blocks(n), kThreads, 0, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(e), n, t.rtol, t.atol, counter);
}

}  // namespace

Status EnqueueCountMismatches(const void* actual, const void* expected, size_t bytes,
                              ElementType type, OutputTolerance tolerance,
                              unsigned long long* counter, cudaStream_t stream) {
  if (type.code == kFloat && type.bits == 32) {
    LaunchClose<float>(actual, expected, bytes, tolerance, counter, stream);
  } else if (type.code == kFloat && type.bits == 64) {
    LaunchClose<double>(actual, expected, bytes, tolerance, counter, stream);
  } else if (type.code == kFloat && type.bits == 16) {
    LaunchClose<__half>(actual, expected, bytes, tolerance, counter, stream);
  } else if (type.code == kBfloat && type.bits == 16) {
    LaunchClose<__nv_bfloat16>(actual, expected, bytes, tolerance, counter, stream);
  } else if (bytes % 4 == 0 && type.bits % 32 == 0) {
    size_t n = bytes / 4;  // 32-bit words: a count of words, not elements, for wider types
    CountNotEqual<uint32_t><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(actual), static_cast<const uint32_t*>(expected), n, counter);
  } else {
    CountNotEqual<uint8_t><<<Blocks(bytes), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(actual), static_cast<const uint8_t*>(expected), bytes, counter);
  }
  KC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

ReferenceSpread ToSpread(const SpreadCounters& counters) {
  auto as_float = [](unsigned bits) {
    float value = 0;
    static_assert(sizeof(value) == sizeof(bits));
    memcpy(&value, &bits, sizeof(value));
    return static_cast<double>(value);
  };
  return {counters.nan_mismatches, counters.bit_mismatches, as_float(counters.max_abs_diff_bits),
          as_float(counters.max_abs_expected_bits)};
}

bool IsFloatingType(ElementType type) {
  return (type.code == kFloat && (type.bits == 16 || type.bits == 32 || type.bits == 64)) ||
         (type.code == kBfloat && type.bits == 16);
}

Status EnqueueSpread(const void* actual, const void* expected, size_t bytes, ElementType type,
                     SpreadCounters* counters, cudaStream_t stream) {
  if (!IsFloatingType(type)) {
    return EnqueueCountMismatches(actual, expected, bytes, type, OutputTolerance{0, 0},
                                  &counters->bit_mismatches, stream);
  }
  const size_t n = bytes / (type.bits / 8);
  const unsigned blocks = Blocks(n);
  if (type.code == kBfloat) {
    FloatSpread<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(actual),
                                                 static_cast<const __nv_bfloat16*>(expected), n,
                                                 counters);
  } else if (type.bits == 16) {
    FloatSpread<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(actual),
                                                 static_cast<const __half*>(expected), n, counters);
  } else if (type.bits == 32) {
    FloatSpread<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(actual),
                                                 static_cast<const float*>(expected), n, counters);
  } else {
    FloatSpread<<<blocks, kThreads, 0, stream>>>(static_cast<const double*>(actual),
                                                 static_cast<const double*>(expected), n, counters);
  }
  KC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

Status EnqueueCountBytesOtherThan(const void* data, size_t bytes, uint8_t value,
                                  unsigned long long* counter, cudaStream_t stream) {
  CountNotByte<<<Blocks(bytes), kThreads, 0, stream>>>(static_cast<const uint8_t*>(data), bytes,
                                                       value, counter);
  KC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kc::native
