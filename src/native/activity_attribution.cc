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

bool StableAmong(const Attribution& attribution, const std::vector<size_t>& indices) {
  for (size_t i : indices) {
    if (attribution.identities[i] != attribution.identities[indices.front()]) return false;
  }
  return true;
}

StatusOr<Attribution> AttributeToWindows(ActivityRecords records,
                                         const std::vector<HostWindow>& windows) {
  std::sort(records.api.begin(), records.api.end(),
            [](const ApiRecord& a, const ApiRecord& b) { return a.start_ns < b.start_ns; });
  std::sort(records.device.begin(), records.device.end(),
            [](const DeviceRecord& a, const DeviceRecord& b) {
              return a.correlation_id < b.correlation_id;
            });
  // Positions into records.device ordered by device start, for the by-time half.
  std::vector<size_t> by_start(records.device.size());
  for (size_t i = 0; i < by_start.size(); ++i)
    by_start[i] = i;
  std::sort(by_start.begin(), by_start.end(), [&](size_t a, size_t b) {
    return records.device[a].start_ns < records.device[b].start_ns;
  });

  Attribution result;
  result.spans_ms.reserve(windows.size());
  result.identities.resize(windows.size());
  std::vector<size_t> owned;
  for (size_t i = 0; i < windows.size(); ++i) {
    const HostWindow& window = windows[i];
    owned.clear();
    for (uint32_t id : CorrelationIdsIn(records.api, window)) {
      auto [first, last] =
          std::equal_range(records.device.begin(), records.device.end(), id, ByCorrelation());
      for (auto it = first; it != last; ++it)
        owned.push_back(it - records.device.begin());
    }
    const size_t by_correlation = owned.size();
    const uint64_t until = std::max(window.end_ns, window.drained_ns);
    auto from =
        std::lower_bound(by_start.begin(), by_start.end(), window.begin_ns,
                         [&](size_t d, uint64_t ns) { return records.device[d].start_ns < ns; });
    for (auto it = from; it != by_start.end() && records.device[*it].start_ns <= until; ++it) {
      owned.push_back(*it);
    }
    std::sort(owned.begin(), owned.end());
    owned.erase(std::unique(owned.begin(), owned.end()), owned.end());
    result.unattributed_activities +=
        static_cast<int64_t>(owned.size() - std::min(owned.size(), by_correlation));

    uint64_t begin = UINT64_MAX;
    uint64_t end = 0;
    std::vector<ActivityIdentity>& identities = result.identities[i];
    for (size_t d : owned) {
      begin = std::min(begin, records.device[d].start_ns);
      end = std::max(end, records.device[d].end_ns);
      identities.push_back(records.device[d].identity);
      result.graph_activities += records.device[d].graph_id != 0;
    }
    if (identities.empty()) {  // nothing to run: the call launched no GPU work
      ++result.empty_windows;
      result.spans_ms.push_back(0.0);
      continue;
    }
    if (end <= begin) {
      return UnavailableError("CUPTI recorded a non-positive span for benchmark iteration " +
                              std::to_string(i));
    }
    result.spans_ms.push_back(static_cast<double>(end - begin) / 1e6);
    std::sort(identities.begin(), identities.end());
  }
  return result;
}

}  // namespace kc::native
