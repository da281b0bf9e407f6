// L2Flush: evicts the GPU's L2 cache by zeroing a buffer twice its size (spec/benchmark.md
// §1.3 step 1, §9.3).
//
// Unlike the reference, the buffer is allocated once per device and kept for the process's life
// (one cudaMalloc, pre-touched once: the first touch of a fresh buffer costs far more than later
// ones). The flush is a cudaMemsetAsync, so no device code is needed (nvbench does the same).
//
// Not thread-safe: the benchmark caller uses it from one thread. Buffers are per device, keyed
// by the device current at the call.
#pragma once

#include <cstddef>
#include <map>

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace kc::native {

// Move-only owner of one cudaMalloc allocation on `device`.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, void* data, size_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void Release() noexcept;

  int device_ = -1;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// L2 size in bytes of the current device (cudaDevAttrL2CacheSize).
StatusOr<size_t> CurrentDeviceL2Bytes();

class L2Flush {
 public:
  L2Flush() = default;
  L2Flush(const L2Flush&) = delete;
  L2Flush& operator=(const L2Flush&) = delete;

  // Enqueues the flush on `stream` (0 = the legacy default stream, torch's default).
  // Allocates the current device's buffer on first use.
  Status Enqueue(cudaStream_t stream);

 private:
  StatusOr<DeviceBuffer*> BufferForCurrentDevice();

  std::map<int, DeviceBuffer> buffers_;  // by device ordinal
};

}  // namespace kc::native
