#include "native/device_element_source.h"

#include <string>

#include <cuda_runtime_api.h>

#include "native/cuda_status.h"

namespace kc::native {
namespace {

Status SynchronizeDevice(int device, int current) {
  if (device != current) KC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cudaError_t synchronized = cudaDeviceSynchronize();
  if (device != current) KC_CUDA_RETURN_IF_ERROR(cudaSetDevice(current));
  KC_CUDA_RETURN_IF_ERROR(synchronized);
  return Status::Ok();
}

}  // namespace

StatusOr<DeviceElementSource> DeviceElementSource::Create(TensorView view, const char* role) {
  if (!view.IsCompact()) {
    return InvalidArgumentError(std::string(role) + " is a non-contiguous CUDA tensor (shape " +
                                ShapeText(view.shape) + ", strides " + ShapeText(view.strides) +
                                "); compare " + role + ".contiguous() instead");
  }
  return DeviceElementSource(std::move(view));
}

StatusOr<const std::byte*> DeviceElementSource::Read(int64_t first, int64_t count,
                                                     std::byte* staging) {
  const int64_t size = static_cast<int64_t>(DTypeSize(view_.dtype));
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpy(staging, view_.data + first * size,
                                     static_cast<size_t>(count * size), cudaMemcpyDefault));
  return static_cast<const std::byte*>(staging);
}

Status SynchronizeDevicesOf(const TensorView& a, const TensorView& b) {
  if (a.memory != MemoryKind::kCuda && b.memory != MemoryKind::kCuda) return Status::Ok();
  int current = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  if (a.memory == MemoryKind::kCuda) KC_RETURN_IF_ERROR(SynchronizeDevice(a.device_id, current));
  if (b.memory == MemoryKind::kCuda &&
      !(a.memory == MemoryKind::kCuda && a.device_id == b.device_id)) {
    KC_RETURN_IF_ERROR(SynchronizeDevice(b.device_id, current));
  }
  return Status::Ok();
}

}  // namespace kc::native
