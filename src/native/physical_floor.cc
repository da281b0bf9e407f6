#include "native/physical_floor.h"

#include <cstdio>
#include <string>

namespace kc::native {
namespace {

std::string Us(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f us", ms * 1e3);
  return text;
}

}  // namespace

nlohmann::json ApplyPhysicalFloor(const FloorInputs& in, SpanFindings& found) {
  const double floor_ms = in.peak_bytes_per_second > 0 ? static_cast<double>(in.bytes_changed) /
                                                             in.peak_bytes_per_second * 1e3
                                                       : 0.0;
  const std::string bytes = std::to_string(in.bytes_changed) + " bytes";
  if (in.peak_bytes_per_second <= 0 && in.bytes_changed > 0) {
    // Fail closed: a floor that cannot be set is not a floor that was met.
    found.flags.push_back(
        "the GPU's peak memory bandwidth could not be read, so the physical "
        "floor of the " +
        bytes + " the call changed could not be checked");
  } else if (in.median_ms < floor_ms) {
    char bandwidth[32];
    std::snprintf(bandwidth, sizeof(bandwidth), "%.0f GB/s", in.peak_bytes_per_second / 1e9);
    found.flags.push_back("the median, " + Us(in.median_ms) + ", is below the physical floor of " +
                          Us(floor_ms) + ": the call changed " + bytes +
                          " of its checked outputs, which takes at least that long at the GPU's "
                          "peak memory bandwidth (" +
                          bandwidth + "), so the timer did not see all of its work");
  } else if (in.median_ms <= 0 && in.checked_bytes > 0) {
    found.flags.push_back("a median of 0 us, though the call's checked outputs hold " +
                          std::to_string(in.checked_bytes) +
                          " bytes: a median of 0 is possible only for outputs without elements");
  }
  if (in.empty_windows > 0 && in.checked_bytes > 0) {
    found.flags.push_back(std::to_string(in.empty_windows) +
                          " timed calls showed no GPU activity, though they wrote checked "
                          "outputs of " +
                          std::to_string(in.checked_bytes) +
                          " bytes: the work ran where the timer could not see it");
  } else if (in.empty_windows > 0) {
    found.conditions.push_back(std::to_string(in.empty_windows) +
                               " timed calls launched no GPU work (empty tensors?); their "
                               "samples are 0");
  }
  return {{"bytes_changed", in.bytes_changed},
          {"checked_bytes", in.checked_bytes},
          {"peak_bytes_per_second", in.peak_bytes_per_second},
          {"floor_ms", floor_ms}};
}

}  // namespace kc::native
