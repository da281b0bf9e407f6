#include "native/l2_flush.h"

#include <utility>

#include "native/cuda_status.h"

namespace kc::native {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(std::exchange(other.device_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = std::exchange(other.device_, -1);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  Release();
}

// Errors are ignored: a destructor has no one to report to, and a failing cudaFree means the
// context is already gone with the memory.
void DeviceBuffer::Release() noexcept {
  if (data_ == nullptr) return;
  int previous = -1;
  if (cudaGetDevice(&previous) == cudaSuccess && previous != device_) {
    static_cast<void>(cudaSetDevice(device_));
  }
  static_cast<void>(cudaFree(data_));
  if (previous >= 0 && previous != device_) static_cast<void>(cudaSetDevice(previous));
  data_ = nullptr;
}

StatusOr<size_t> CurrentDeviceL2Bytes() {
  int device = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  int l2_bytes = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  return static_cast<size_t>(l2_bytes);
}

StatusOr<DeviceBuffer*> L2Flush::BufferForCurrentDevice() {
  int device = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  if (auto it = buffers_.find(device); it != buffers_.end()) return &it->second;

  KC_ASSIGN_OR_RETURN(size_t l2_bytes, CurrentDeviceL2Bytes());
  if (l2_bytes == 0) return UnavailableError("the device reports no L2 cache to flush");
  const size_t bytes = 2 * l2_bytes;
  void* data = nullptr;
  KC_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, bytes));
  DeviceBuffer buffer(device, data, bytes);
  // Pre-touch, so the first timed flush costs what every later one does.
  KC_CUDA_RETURN_IF_ERROR(cudaMemset(buffer.data(), 0, bytes));
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return &buffers_.emplace(device, std::move(buffer)).first->second;
}

Status L2Flush::Enqueue(cudaStream_t stream) {
  KC_ASSIGN_OR_RETURN(DeviceBuffer * buffer, BufferForCurrentDevice());
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer->data(), 0, buffer->bytes(), stream));
  return Status::Ok();
}

}  // namespace kc::native
