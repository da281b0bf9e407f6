#include "base/latency_summary.h"

#include <map>

#include <gtest/gtest.h>

namespace kc {
namespace {

std::map<std::string, double> AsMap(const LatencyFields& fields) {
  return {fields.begin(), fields.end()};
}

TEST(LatencySummaryTest, MatchesPythonStatistics) {
  // statistics.median / fmean / pstdev of [4, 1, 3, 2] are 2.5, 2.5, 1.118...
  auto stats = AsMap(SummarizeLatencies({4, 1, 3, 2}));
  EXPECT_DOUBLE_EQ(stats["latency_ms_median"], 2.5);
  EXPECT_DOUBLE_EQ(stats["latency_ms_mean"], 2.5);
  EXPECT_DOUBLE_EQ(stats["latency_ms_min"], 1);
  EXPECT_DOUBLE_EQ(stats["latency_ms_max"], 4);
  EXPECT_NEAR(stats["latency_ms_std"], 1.1180339887, 1e-9);
  EXPECT_DOUBLE_EQ(stats["n_samples"], 4);
  EXPECT_DOUBLE_EQ(stats["latency_ms_p25"], 1.75);  // numpy.percentile(..., 25)
  EXPECT_DOUBLE_EQ(stats["latency_ms_p99"], 3.97);
}

TEST(LatencySummaryTest, OneSampleHasNoSpread) {
  auto stats = AsMap(SummarizeLatencies({0.5}));
  EXPECT_DOUBLE_EQ(stats["latency_ms_std"], 0);
  EXPECT_DOUBLE_EQ(stats["latency_ms_p5"], 0.5);
  EXPECT_DOUBLE_EQ(stats["latency_ms_p99"], 0.5);
}

}  // namespace
}  // namespace kc
