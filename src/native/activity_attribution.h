// Attribution of CUPTI activity records to benchmark iterations (spec/benchmark.md §1.3 step 5).
//
// Pure code: no CUDA, no CUPTI, no threads. An iteration owns the device activities (kernels,
// memcpys, memsets)
//   - whose correlation id belongs to a host API record (runtime or driver) that started inside
//     the iteration's host window [begin_ns, end_ns], and
//   - that started on the device inside [begin_ns, drained_ns]: the GPU is idle at both ends of
//     a drained window, so whatever ran then is the call's, launched by an API record or not.
//     A program that hides the API records of its launches (cuptiActivityDisable around them,
//     or a launch from another thread) is still timed; such activities are counted.
// Its sample is the span max(end) - min(start) over those activities, so the L2 flush (launched
// and finished before begin_ns) and the checks after drained_ns never count.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace kc::native {

// What makes two device activities "the same" for the activities_stable flag:
// (kind, kernel name or copy kind, bytes). Kernel names are interned to `name_id`.
struct ActivityIdentity {
  uint32_t kind = 0;       // CUpti_ActivityKind
  uint32_t name_id = 0;    // interned kernel name; 0 for memcpy and memset
  uint32_t copy_kind = 0;  // CUpti_ActivityMemcpyKind; 0 otherwise
  uint64_t bytes = 0;      // memcpy and memset size; 0 for kernels

  auto operator<=>(const ActivityIdentity&) const = default;
};

struct ApiRecord {
  uint64_t start_ns = 0;  // host timestamp, same clock as cuptiGetTimestamp
  uint32_t correlation_id = 0;
};

struct DeviceRecord {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t correlation_id = 0;
  ActivityIdentity identity;
  uint32_t graph_id = 0;  // the CUDA graph that launched it; 0 for a plain launch
};

struct ActivityRecords {
  std::vector<ApiRecord> api;
  std::vector<DeviceRecord> device;
  int64_t canaries = 0;  // the timer's canary kernels (timer_canary.h), kept out of `device`
};

// Host timestamps taken just before and just after one call of the benchmarked function.
struct HostWindow {
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
  uint64_t drained_ns = 0;  // after the synchronize that followed the call; >= end_ns
};

struct Attribution {
  std::vector<double> spans_ms;  // one per window, in window order
  // Per window, the sorted identities of its activities.
  std::vector<std::vector<ActivityIdentity>> identities;
  // Activities owned by time only: no API record inside the window launched them.
  int64_t unattributed_activities = 0;
  // Owned activities that a CUDA graph launched.
  int64_t graph_activities = 0;
  // Windows with no device activity at all (a call on empty tensors); their span is 0.
  int64_t empty_windows = 0;
};

// True when the windows `indices` all saw the identity multiset of the first of them.
bool StableAmong(const Attribution& attribution, const std::vector<size_t>& indices);

// A window with no device activity has a span of 0 (counted in empty_windows). Fails with
// kUnavailable when a window's activities have a non-positive span.
// Consumes `records` (sorts them in place).
StatusOr<Attribution> AttributeToWindows(ActivityRecords records,
                                         const std::vector<HostWindow>& windows);

}  // namespace kc::native
