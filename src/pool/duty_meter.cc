#include "pool/duty_meter.h"

#include <algorithm>

namespace kc::pool {

namespace {

constexpr int64_t kWindowNs = std::chrono::nanoseconds(DutyMeter::kWindow).count();

double Fraction(int64_t part_ns, int64_t whole_ns) {
  return whole_ns <= 0 ? 0.0 : std::clamp(static_cast<double>(part_ns) / whole_ns, 0.0, 1.0);
}

}  // namespace

void DutyMeter::SpanBegan(int64_t now_ns) {
  if (depth_++ == 0) open_since_ns_ = now_ns;
}

void DutyMeter::SpanEnded(int64_t now_ns) {
  if (depth_ == 0) return;  // an end without a begin adds nothing
  if (--depth_ > 0) return;
  const int64_t end_ns = std::max(now_ns, open_since_ns_);
  closed_inside_ns_ += end_ns - open_since_ns_;
  recent_.push_back({open_since_ns_, end_ns});
  Forget(now_ns);
}

void DutyMeter::Forget(int64_t now_ns) {
  while (!recent_.empty() && recent_.front().end_ns < now_ns - kWindowNs)
    recent_.pop_front();
}

DutyMeter::Reading DutyMeter::Read(int64_t now_ns) const {
  const int64_t open_ns = depth_ > 0 ? std::max<int64_t>(0, now_ns - open_since_ns_) : 0;
  const int64_t window_begin = std::max(started_ns_, now_ns - kWindowNs);
  int64_t window_inside = depth_ > 0 ? now_ns - std::max(open_since_ns_, window_begin) : 0;
  for (const Interval& interval : recent_) {
    window_inside += std::max<int64_t>(
        0, std::min(interval.end_ns, now_ns) - std::max(interval.begin_ns, window_begin));
  }
  Reading reading;
  reading.inside_seconds = static_cast<double>(closed_inside_ns_ + open_ns) / 1e9;
  reading.since_start = Fraction(closed_inside_ns_ + open_ns, now_ns - started_ns_);
  reading.window_seconds = static_cast<double>(now_ns - window_begin) / 1e9;
  reading.last_window = Fraction(window_inside, now_ns - window_begin);
  reading.inside = depth_ > 0;
  return reading;
}

}  // namespace kc::pool
