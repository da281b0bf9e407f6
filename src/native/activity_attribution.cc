#include "native/activity_attribution.h"

#include <algorithm>
#include <string>

namespace kc::native {
namespace {

// The distinct correlation ids of API records that started inside `window`. A runtime call and
// the driver calls it makes may share one id, hence the dedup (each activity counts once).
std::vector<uint32_t> CorrelationIdsIn(const std::vector<ApiRecord>& api_by_start,
                                       const HostWindow& window) {
  auto first =
      std::lower_bound(api_by_start.begin(), api_by_start.end(), window.begin_ns,
                       [](const ApiRecord& record, uint64_t ns) { return record.start_ns < ns; });
  auto last =
      std::upper_bound(first, api_by_start.end(), window.end_ns,
                       [](uint64_t ns, const ApiRecord& record) { return ns < record.start_ns; });
  std::vector<uint32_t> ids;
  ids.reserve(static_cast<size_t>(last - first));
  for (auto it = first; it != last; ++it)
    ids.push_back(it->correlation_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// Heterogeneous comparator for equal_range over device records sorted by correlation id.
struct ByCorrelation {
  bool operator()(const DeviceRecord& record, uint32_t id) const {
    return record.correlation_id < id;
  }
  bool operator()(uint32_t id, const DeviceRecord& record) const {
    return id < record.correlation_id;
  }
};

}  // namespace

StatusOr<Attribution> AttributeToWindows(ActivityRecords records,
                                         const std::vector<HostWindow>& windows) {
  std::sort(records.api.begin(), records.api.end(),
            [](const ApiRecord& a, const ApiRecord& b) { return a.start_ns < b.start_ns; });
  std::sort(records.device.begin(), records.device.end(),
            [](const DeviceRecord& a, const DeviceRecord& b) {
              return a.correlation_id < b.correlation_id;
            });

  Attribution result;
  result.spans_ms.reserve(windows.size());
  std::vector<ActivityIdentity> first_identities;
  std::vector<ActivityIdentity> identities;
  for (size_t i = 0; i < windows.size(); ++i) {
    uint64_t begin = UINT64_MAX;
    uint64_t end = 0;
    identities.clear();
    for (uint32_t id : CorrelationIdsIn(records.api, windows[i])) {
      auto [first, last] =
          std::equal_range(records.device.begin(), records.device.end(), id, ByCorrelation());
      for (auto it = first; it != last; ++it) {
        begin = std::min(begin, it->start_ns);
        end = std::max(end, it->end_ns);
        identities.push_back(it->identity);
      }
    }
    if (identities.empty()) {
      return UnavailableError("CUPTI recorded no GPU activity for benchmark iteration " +
                              std::to_string(i));
    }
    if (end <= begin) {
      return UnavailableError("CUPTI recorded a non-positive span for benchmark iteration " +
                              std::to_string(i));
    }
    result.spans_ms.push_back(static_cast<double>(end - begin) / 1e6);
    std::sort(identities.begin(), identities.end());
    if (i == 0) {
      first_identities = identities;
    } else if (identities != first_identities) {
      result.activities_stable = false;
    }
  }
  return result;
}

}  // namespace kc::native
