#include "server/status/status_history.h"

#include <gtest/gtest.h>

namespace kc::server {
namespace {

constexpr int64_t kStepMs = 10'000;
constexpr int64_t kT0 = 1'700'000'000'000;  // a multiple of kStepMs

StatusHistory::Finished At(int64_t unix_ms, double total_ms, std::string error_kind = "") {
  return {.unix_ms = unix_ms, .error_kind = std::move(error_kind), .total_ms = total_ms};
}

TEST(StatusHistory, AnHourOfIntervalsEndingWithNow) {
  StatusHistory history;
  const auto points = history.Points(kT0 + 3'000);
  ASSERT_EQ(points.size(), StatusHistory::kIntervals);
  EXPECT_EQ(points.back().start_unix_ms, kT0);
  EXPECT_EQ(points.front().start_unix_ms,
            kT0 - static_cast<int64_t>(StatusHistory::kIntervals - 1) * kStepMs);
  for (const auto& point : points)
    EXPECT_EQ(point.requests, 0u);
}

TEST(StatusHistory, CountsRequestsAndErrorsByKindPerInterval) {
  StatusHistory history;
  history.Record(At(kT0 + 1, 5));
  history.Record(At(kT0 + 9'999, 7, "runtime"));
  history.Record(At(kT0 + kStepMs, 9, "runtime"));
  history.Record(At(kT0 + kStepMs + 5, 9, "timeout"));
  const auto points = history.Points(kT0 + kStepMs + 100);
  const auto& first = points[points.size() - 2];
  const auto& second = points.back();
  EXPECT_EQ(first.start_unix_ms, kT0);
  EXPECT_EQ(first.requests, 2u);
  EXPECT_EQ(first.errors, (std::map<std::string, uint64_t>{{"runtime", 1}}));
  EXPECT_EQ(second.requests, 2u);
  EXPECT_EQ(second.errors, (std::map<std::string, uint64_t>{{"runtime", 1}, {"timeout", 1}}));
}

TEST(StatusHistory, PercentilesByNearestRankInOpenAndClosedIntervals) {
  StatusHistory history;
  for (int ms = 1; ms <= 100; ++ms)
    history.Record(At(kT0 + ms, ms));
  auto points = history.Points(kT0 + 500);
  EXPECT_EQ(points.back().p50_ms, 50);
  EXPECT_EQ(points.back().p99_ms, 99);
  history.Record(At(kT0 + kStepMs, 1000));  // closes the first interval
  points = history.Points(kT0 + kStepMs);
  EXPECT_EQ(points[points.size() - 2].p50_ms, 50);
  EXPECT_EQ(points[points.size() - 2].p99_ms, 99);
  EXPECT_EQ(points.back().p99_ms, 1000);
}

TEST(StatusHistory, ForgetsRequestsPastTheHour) {
  StatusHistory history;
  history.Record(At(kT0, 100));
  const int64_t hour_later = kT0 + static_cast<int64_t>(StatusHistory::kIntervals) * kStepMs;
  for (const auto& point : history.Points(hour_later))
    EXPECT_EQ(point.requests, 0u);
}

TEST(StatusHistory, GpuTimeRisesAreSpreadOverTheTimeBetweenSamples) {
  StatusHistory history;
  history.SampleGpuTime(kT0 + 1'000, 0, 0);  // the start
  // 48 s later, 24 s of lease and 12 s inside spans: half and a quarter of each interval's time.
  history.SampleGpuTime(kT0 + 4 * kStepMs + 2'000, 20, 12);
  history.SampleGpuTime(kT0 + 4 * kStepMs + 9'000, 24, 12);  // same interval: the last counts
  const auto points = history.Points(kT0 + 4 * kStepMs + 9'500);
  const size_t n = points.size();
  EXPECT_DOUBLE_EQ(points[n - 5].lease_held_seconds, 4.5);  // 9 s of the start's interval
  EXPECT_DOUBLE_EQ(points[n - 5].span_seconds, 2.25);
  for (size_t k = n - 4; k < n - 1; ++k) {
    EXPECT_DOUBLE_EQ(points[k].lease_held_seconds, 5);
    EXPECT_DOUBLE_EQ(points[k].span_seconds, 2.5);
  }
  EXPECT_DOUBLE_EQ(points[n - 1].lease_held_seconds, 4.5);
}

// Before: a 12 s hold sampled at its start and end went whole into one 10 s interval.
TEST(StatusHistory, ALongHoldSampledRarelyNeverExceedsAnIntervalsTime) {
  StatusHistory history;
  history.SampleGpuTime(kT0 + 9'000, 0, 0);
  history.SampleGpuTime(kT0 + 21'000, 12, 12);
  for (const auto& point : history.Points(kT0 + 21'000))
    EXPECT_LE(point.lease_held_seconds, 10.0 + 1e-9);
}

TEST(StatusHistory, GpuTimeOfAnIntervalNeverExceedsItsWallTimeWhenSampledOften) {
  StatusHistory history;
  // One GPU held all along, sampled every second: 10 s per interval at most.
  for (int s = 0; s <= 60; ++s)
    history.SampleGpuTime(kT0 + s * 1'000, s, s);
  const auto points = history.Points(kT0 + 60'000);
  for (const auto& point : points)
    EXPECT_LE(point.lease_held_seconds, 10.0 + 1e-9);
  EXPECT_DOUBLE_EQ(points[points.size() - 2].lease_held_seconds, 10);
}

TEST(StatusHistory, KeepsAUniformSampleOfManyLatencies) {
  StatusHistory history;
  const size_t n = StatusHistory::kLatencySamples * 4;
  for (size_t i = 0; i < n; ++i)
    history.Record(At(kT0, static_cast<double>(i % 100)));
  const auto points = history.Points(kT0);
  EXPECT_EQ(points.back().requests, n);
  EXPECT_NEAR(points.back().p50_ms, 50, 5);
}

TEST(NearestRank, SmallSets) {
  std::vector<float> none;
  EXPECT_EQ(NearestRank(none, 0.5), 0);
  std::vector<float> one = {3};
  EXPECT_EQ(NearestRank(one, 0.99), 3);
  std::vector<float> four = {4, 1, 3, 2};
  EXPECT_EQ(NearestRank(four, 0.5), 2);
  EXPECT_EQ(NearestRank(four, 0.99), 4);
}

}  // namespace
}  // namespace kc::server
