#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "native/cuda_status.h"
#include "native/input_variant.h"

namespace kc::native {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;
constexpr uint8_t kFloat = 2, kBfloat = 4;  // DLDataTypeCode

__device__ __half Scaled(__half v) {
  return __float2half(__half2float(v) * 0.75f);
}
__device__ __nv_bfloat16 Scaled(__nv_bfloat16 v) {
  return __float2bfloat16(__bfloat162float(v) * 0.75f);
}
__device__ float Scaled(float v) {
  return v * 0.75f;
}
__device__ double Scaled(double v) {
  return v * 0.75;
}

template <typename T>
__global__ void ReverseScaled(const T* in, T* out, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = Scaled(in[n - 1 - i]);
  }
}

template <typename T>
Status Launch(const void* in, void* out, size_t bytes, cudaStream_t stream) {
  const size_t n = bytes / sizeof(T);
  if (n == 0) return Status::Ok();
  const size_t wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  ReverseScaled<T>
      <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out), n);
  KC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

bool HasFreshVariant(ElementType type) {
  return (type.code == kFloat && (type.bits == 16 || type.bits == 32 || type.bits == 64)) ||
         (type.code == kBfloat && type.bits == 16);
}

Status EnqueueFreshVariant(const void* in, void* out, size_t bytes, ElementType type,
                           cudaStream_t stream) {
  if (type.code == kBfloat) return Launch<__nv_bfloat16>(in, out, bytes, stream);
  switch (type.bits) {
    case 16:
      return Launch<__half>(in, out, bytes, stream);
    case 32:
      return Launch<float>(in, out, bytes, stream);
    case 64:
      return Launch<double>(in, out, bytes, stream);
    default:
      return InvalidArgumentError("no fresh variant for this element type");
  }
}

}  // namespace kc::native
