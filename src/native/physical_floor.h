// PhysicalFloor: whether a benchmark's number is physically possible (docs/benchmark-integrity.md
// "Physically possible"). Pure: no CUDA.
//
// A call that changes N bytes of its checked outputs writes them to memory: at the GPU's peak
// memory bandwidth that takes at least N / bandwidth, even when they would stay in L2 (the
// floor is HBM's, so it never flags honest work). Bytes changed, not the outputs' size: an
// index_add_ of a few rows into a large buffer has a floor of those rows. A median below the
// floor, a median of 0 with outputs that hold elements, or timed calls with no GPU activity while
// their checked outputs are written, mean the timer did not see the work (records switched off,
// work launched where it cannot see, a host thread finishing after the call): flags, never
// refusals (only a wrong output is proof).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "native/span_findings.h"

namespace kc::native {

struct FloorInputs {
  uint64_t bytes_changed = 0;        // by the reference call, in its checked outputs
  uint64_t checked_bytes = 0;        // the checked outputs' size
  double peak_bytes_per_second = 0;  // 0: unknown (flagged when the call changed bytes)
  double median_ms = 0;
  int64_t empty_windows = 0;  // timed calls with no device activity
};

// Adds what it sees to `found`; returns integrity.floor:
// {"bytes_changed", "checked_bytes", "peak_bytes_per_second", "floor_ms"}.
nlohmann::json ApplyPhysicalFloor(const FloorInputs& in, SpanFindings& found);

}  // namespace kc::native
