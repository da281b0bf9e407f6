#include "native/device_counters.h"

#include "native/cuda_status.h"

namespace kc::native {

StatusOr<std::shared_ptr<DeviceBuffer>> AllocateDeviceBuffer(size_t bytes) {
  int device = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  void* data = nullptr;
  KC_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, bytes == 0 ? 1 : bytes));
  return std::make_shared<DeviceBuffer>(device, data, bytes);
}

StatusOr<std::shared_ptr<DeviceBuffer>> DeviceCounters::AllocateZeroed(size_t bytes) {
  KC_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffer> buffer, AllocateDeviceBuffer(bytes));
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer->data(), 0, bytes, nullptr));
  return buffer;
}

Status DeviceCounters::CopyToHost(void* host, size_t bytes) const {
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpy(host, buffer_->data(), bytes, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

}  // namespace kc::native
