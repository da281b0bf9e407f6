#include "server/status/status_history.h"

#include <algorithm>
#include <cmath>

namespace kc::server {

namespace {

constexpr int64_t kStepMs = std::chrono::milliseconds(StatusHistory::kStep).count();

}  // namespace

int64_t StatusHistory::StartOf(int64_t unix_ms) {
  return unix_ms - ((unix_ms % kStepMs) + kStepMs) % kStepMs;
}

double NearestRank(std::vector<float>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

void StatusHistory::Close(Interval& interval) {
  interval.p50_ms = NearestRank(interval.latencies_ms, 0.50);
  interval.p99_ms = NearestRank(interval.latencies_ms, 0.99);
  interval.latencies_ms = {};
}

StatusHistory::Interval& StatusHistory::At(int64_t start) {
  for (auto it = intervals_.rbegin(); it != intervals_.rend(); ++it) {
    if (it->start_unix_ms == start) return *it;
    if (it->start_unix_ms < start) break;
  }
  if (!intervals_.empty()) Close(intervals_.back());  // it takes no more requests
  intervals_.push_back({.start_unix_ms = start});
  while (intervals_.size() > kIntervals)
    intervals_.pop_front();
  return intervals_.back();
}

void StatusHistory::Record(const Finished& request) {
  const int64_t start = StartOf(request.unix_ms);
  std::lock_guard lock(mu_);
  if (!intervals_.empty() && start < intervals_.back().start_unix_ms) return;  // clock stepped
  Interval& interval = At(start);
  ++interval.requests;
  if (!request.error_kind.empty()) ++interval.errors[request.error_kind];
  auto& latencies = interval.latencies_ms;
  if (latencies.size() < kLatencySamples) {
    latencies.push_back(static_cast<float>(request.total_ms));
  } else {  // reservoir sampling keeps a uniform sample of the interval's requests
    sampler_ ^= sampler_ << 13;
    sampler_ ^= sampler_ >> 7;
    sampler_ ^= sampler_ << 17;
    const uint64_t slot = sampler_ % interval.requests;
    if (slot < kLatencySamples) latencies[slot] = static_cast<float>(request.total_ms);
  }
}

void StatusHistory::SampleGpuTime(int64_t unix_ms, double lease_held_seconds, double span_seconds) {
  const GpuSample sample{unix_ms, lease_held_seconds, span_seconds};
  std::lock_guard lock(mu_);
  if (!gpu_samples_.empty() && unix_ms < gpu_samples_.back().unix_ms) return;  // clock stepped
  if (!gpu_samples_.empty() && StartOf(gpu_samples_.back().unix_ms) == StartOf(unix_ms)) {
    gpu_samples_.back() = sample;  // an interval keeps its last sample
  } else {
    gpu_samples_.push_back(sample);
  }
  const int64_t hour = static_cast<int64_t>(kIntervals) * kStepMs;
  while (gpu_samples_.size() > 2 && gpu_samples_[1].unix_ms < unix_ms - hour)
    gpu_samples_.pop_front();
}

std::vector<StatusHistory::Point> StatusHistory::Points(int64_t now_unix_ms) const {
  const int64_t last = StartOf(now_unix_ms);
  const int64_t first = last - static_cast<int64_t>(kIntervals - 1) * kStepMs;
  std::vector<Point> points(kIntervals);
  for (size_t k = 0; k < kIntervals; ++k)
    points[k].start_unix_ms = first + static_cast<int64_t>(k) * kStepMs;
  std::lock_guard lock(mu_);
  for (const Interval& interval : intervals_) {
    if (interval.start_unix_ms < first || interval.start_unix_ms > last) continue;
    Point& point = points[static_cast<size_t>((interval.start_unix_ms - first) / kStepMs)];
    point.requests = interval.requests;
    point.errors = interval.errors;
    point.p50_ms = interval.p50_ms;
    point.p99_ms = interval.p99_ms;
    if (!interval.latencies_ms.empty()) {  // the newest interval, still open
      std::vector<float> latencies = interval.latencies_ms;
      point.p50_ms = NearestRank(latencies, 0.50);
      point.p99_ms = NearestRank(latencies, 0.99);
    }
  }
  // Each rise between two samples, spread over the time between them at an even rate: sparse
  // samples never put more GPU time in an interval than its wall time allows.
  for (size_t k = 1; k < gpu_samples_.size(); ++k) {
    const GpuSample &from = gpu_samples_[k - 1], &to = gpu_samples_[k];
    const double span_ms = static_cast<double>(to.unix_ms - from.unix_ms);
    if (span_ms <= 0) continue;
    for (int64_t start = std::max(StartOf(from.unix_ms), first);
         start <= std::min(StartOf(to.unix_ms), last); start += kStepMs) {
      const int64_t overlap = std::min(to.unix_ms, start + kStepMs) - std::max(from.unix_ms, start);
      if (overlap <= 0) continue;
      const double share = static_cast<double>(overlap) / span_ms;
      Point& point = points[static_cast<size_t>((start - first) / kStepMs)];
      point.lease_held_seconds += (to.lease_held_seconds - from.lease_held_seconds) * share;
      point.span_seconds += (to.span_seconds - from.span_seconds) * share;
    }
  }
  return points;
}

}  // namespace kc::server
