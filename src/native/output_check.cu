#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "native/cuda_status.h"
#include "native/output_check.h"

namespace kc::native {
namespace {

constexpr int kThreads = 256;
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
  constexpr uint8_t kFloat = 2, kBfloat = 4;
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

Status EnqueueCountUnpoisoned(const void* data, size_t bytes, unsigned long long* counter,
                              cudaStream_t stream) {
  CountNotByte<<<Blocks(bytes), kThreads, 0, stream>>>(static_cast<const uint8_t*>(data), bytes,
                                                       kPoisonByte, counter);
  KC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kc::native
