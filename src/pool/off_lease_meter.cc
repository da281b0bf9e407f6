#include "pool/off_lease_meter.h"

#include <algorithm>
#include <limits>

namespace kc::pool {

void OffLeaseMeter::Acquired(int64_t at_us) {
  tenures_.push_back({at_us, std::numeric_limits<int64_t>::max()});
}

void OffLeaseMeter::Released(int64_t at_us) {
  if (!tenures_.empty() && tenures_.back().second == std::numeric_limits<int64_t>::max())
    tenures_.back().second = at_us;
}

bool OffLeaseMeter::Leased(int64_t from_us, int64_t to_us) const {
  return std::any_of(tenures_.begin(), tenures_.end(), [&](const auto& tenure) {
    return tenure.first <= to_us && from_us <= tenure.second;
  });
}

void OffLeaseMeter::Add(const std::vector<GpuUseSample>& samples,
                        const std::function<bool(int pid)>& ours) {
  for (const GpuUseSample& sample : samples) {
    newest_us_ = std::max(newest_us_, sample.end_us);
    auto [last, first] = last_end_us_.try_emplace(sample.pid, 0);
    if (!first && sample.end_us <= last->second) continue;  // read before
    const int64_t previous = first ? sample.end_us - kFirstPeriodUs : last->second;
    last->second = sample.end_us;
    const int64_t window_start = sample.end_us - kGraceUs;
    if (sample.sm_percent <= 0 || window_start < started_us_) continue;
    if (Leased(window_start, sample.end_us) || !ours(sample.pid)) continue;
    const int64_t period = std::clamp<int64_t>(sample.end_us - previous, 0, kMaxPeriodUs);
    busy_us_ += static_cast<double>(period) * std::min(sample.sm_percent, 100) / 100.0;
    last_pid_ = sample.pid;
    if (counted_.size() < kEvidence) counted_.push_back({sample, period});
  }
}

}  // namespace kc::pool
