// DeviceCounters: a zeroed array of device-side counters that checks add to (output_check.h)
// and the host reads once, after the checks; plus AllocateDeviceBuffer for the benchmark's own
// copies. Freed with the owner.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "base/status.h"
#include "native/l2_flush.h"

namespace kc::native {

// Device memory of `bytes` (at least 1) on the current device.
StatusOr<std::shared_ptr<DeviceBuffer>> AllocateDeviceBuffer(size_t bytes);

class DeviceCounters {
 public:
  // `count` counters of `T` (unsigned long long, or a plain struct of them), zeroed on the
  // legacy stream.
  template <typename T>
  static StatusOr<DeviceCounters> Create(size_t count) {
    KC_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffer> buffer, AllocateZeroed(count * sizeof(T)));
    return DeviceCounters(std::move(buffer));
  }
  DeviceCounters() = default;

  template <typename T>
  T* at(size_t i) const {
    return static_cast<T*>(buffer_->data()) + i;
  }
  // Synchronous copy of every counter to the host (waits for the checks that add to them).
  template <typename T>
  StatusOr<std::vector<T>> Read() const {
    std::vector<T> host(buffer_->bytes() / sizeof(T));
    KC_RETURN_IF_ERROR(CopyToHost(host.data(), host.size() * sizeof(T)));
    return host;
  }
  bool empty() const { return buffer_ == nullptr; }

 private:
  explicit DeviceCounters(std::shared_ptr<DeviceBuffer> buffer) : buffer_(std::move(buffer)) {}
  static StatusOr<std::shared_ptr<DeviceBuffer>> AllocateZeroed(size_t bytes);
  Status CopyToHost(void* host, size_t bytes) const;

  std::shared_ptr<DeviceBuffer> buffer_;
};

}  // namespace kc::native
