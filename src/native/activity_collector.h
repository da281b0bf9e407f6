// ActivityCollector: the process's CUPTI Activity API client (spec/benchmark.md §9.1).
//
// CUPTI's buffer callbacks carry no user pointer, so there is exactly one collector per process:
// Get() registers the buffer-request/complete callbacks on first use and they stay registered
// for the worker's life ("CUPTI stays subscribed"). The activity kinds are enabled only between
// Start() and Stop()/Abort(), i.e. only around a timed loop.
//
// Thread-safety: Start/Stop/Abort are called by one thread at a time (the benchmark caller).
// CUPTI may call the buffer callbacks from its own worker thread at any time; they only touch
// state guarded by mu_.
//
// Usage:
//   KC_ASSIGN_OR_RETURN(ActivityCollector* collector, ActivityCollector::Get());
//   KC_RETURN_IF_ERROR(collector->Start());
//   ... timed loop; on an early exit call collector->Abort() ...
//   KC_RETURN_IF_ERROR(SynchronizeDevice());
//   KC_ASSIGN_OR_RETURN(ActivityRecords records, collector->Stop());
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cupti.h>

#include "base/status.h"
#include "native/activity_attribution.h"

namespace kc::native {

class ActivityCollector {
 public:
  // The process's collector; registers the CUPTI buffer callbacks on the first call.
  static StatusOr<ActivityCollector*> Get();

  ActivityCollector(const ActivityCollector&) = delete;
  ActivityCollector& operator=(const ActivityCollector&) = delete;

  // Clears the stored records and enables RUNTIME, DRIVER, CONCURRENT_KERNEL, MEMCPY, MEMSET.
  Status Start();

  // Disables the kinds, forces CUPTI to deliver every buffer and returns what was recorded.
  // The device must be idle (synchronised) first, or records may be incomplete.
  // kUnavailable when CUPTI dropped records.
  StatusOr<ActivityRecords> Stop();

  // Stop() for error paths: never fails, discards the records.
  void Abort() noexcept;

  // The kernel name interned as `id` (ActivityIdentity::name_id); empty when unknown.
  std::string KernelName(uint32_t id);

 private:
  ActivityCollector() = default;

  static void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                         size_t size, size_t valid_size);

  static Status DisableKinds(size_t count);
  Status FlushAndDisable();
  void Parse(uint8_t* buffer, size_t valid_size);
  uint32_t InternKernelName(const char* name);

  // State below is protected by mu_.
  std::mutex mu_;
  bool collecting_ = false;
  ActivityRecords records_;
  size_t dropped_ = 0;
  Status parse_error_;
  std::vector<uint8_t*> free_buffers_;  // 8-byte aligned, kBufferBytes each; reused
  // Kernel names, interned so identities compare by id. Name pointers are shared by CUPTI for
  // every record of the same kernel, so the pointer map is the fast path.
  std::unordered_map<std::string, uint32_t> name_id_by_text_;
  std::unordered_map<const char*, const std::pair<const std::string, uint32_t>*>
      name_id_by_pointer_;
};

}  // namespace kc::native
