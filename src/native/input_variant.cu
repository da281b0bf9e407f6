#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "native/cuda_status.h"
#include "native/input_variant.h"

namespace kc::native {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;
constexpr uint8_t kFloat = 2, kBfloat = 4;  // DLDataTypeCode

__device__ __half Scaled(__half v, float scale) {
  return __float2half(__half2float(v) * scale);
}
__device__ __nv_bfloat16 Scaled(__nv_bfloat16 v, float scale) {
  return __float2bfloat16(__bfloat162float(v) * scale);
}
__device__ float Scaled(float v, float scale) {
  return v * scale;
}
__device__ double Scaled(double v, float scale) {
  return v * static_cast<double>(scale);
}

template <typename T>
__global__ void ReverseScaled(const T* in, T* out, size_t n, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    out[i] = Scaled(in[n - 1 - i], scale);
  }
}

template <typename T>
Status Launch(const void* in, void* out, size_t bytes, float scale, cudaStream_t stream) {
  const size_t n = bytes / sizeof(T);
  if (n == 0) return Status::Ok();
  const size_t wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  ReverseScaled<T>
      <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out), n, scale);
  KC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

bool HasFreshVariant(ElementType type) {
  return (type.code == kFloat && (type.bits == 16 || type.bits == 32 || type.bits == 64)) ||
         (type.code == kBfloat && type.bits == 16);
}

Status EnqueueReversedScaled(const void* in, void* out, size_t bytes, ElementType type, float scale,
                             cudaStream_t stream) {
  if (type.code == kBfloat) return Launch<__nv_bfloat16>(in, out, bytes, scale, stream);
  switch (type.bits) {
    case 16:
      return Launch<__half>(in, out, bytes, scale, stream);
    case 32:
      return Launch<float>(in, out, bytes, scale, stream);
    case 64:
      return Launch<double>(in, out, bytes, scale, stream);
    default:
      return InvalidArgumentError("no fresh variant for this element type");
  }
}

Status EnqueueFreshVariant(const void* in, void* out, size_t bytes, ElementType type,
                           cudaStream_t stream) {
  return EnqueueReversedScaled(in, out, bytes, type, kFreshScale, stream);
}

}  // namespace kc::native
