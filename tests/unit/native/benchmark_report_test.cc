#include "native/benchmark_report.h"

#include <gtest/gtest.h>

namespace kc::native {
namespace {

TEST(BenchmarkReportTest, LatencyJsonHasTheSpecKeysAndOurs) {
  nlohmann::json out = LatencyJson({{2.0, 1.0, 3.0}, false});
  EXPECT_DOUBLE_EQ(out["latency_ms_median"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(out["latency_ms_min"].get<double>(), 1.0);
  EXPECT_EQ(out["n_samples"].get<int64_t>(), 3);
  EXPECT_FALSE(out["activities_stable"].get<bool>());
  EXPECT_TRUE(out.contains("latency_ms_p99"));
}

TEST(BenchmarkReportTest, PairedRatioOfEqualTimesIsOne) {
  std::vector<double> a(100, 2.0), b(100, 2.0);
  RatioInterval r = PairedRatio(a, b);
  EXPECT_DOUBLE_EQ(r.median, 1.0);
  EXPECT_DOUBLE_EQ(r.low, 1.0);
  EXPECT_DOUBLE_EQ(r.high, 1.0);
}

TEST(BenchmarkReportTest, PairedRatioIntervalHoldsTheMedian) {
  std::vector<double> a, b;
  for (int i = 0; i < 101; ++i) {
    a.push_back(2.0 + 0.01 * (i % 7));
    b.push_back(1.0);
  }
  RatioInterval r = PairedRatio(a, b);
  EXPECT_LE(r.low, r.median);
  EXPECT_LE(r.median, r.high);
  EXPECT_GE(r.low, 2.0);
  EXPECT_LE(r.high, 2.06);
}

TEST(BenchmarkReportTest, OnePairIsItsOwnInterval) {
  RatioInterval r = PairedRatio({3.0}, {1.5});
  EXPECT_DOUBLE_EQ(r.median, 2.0);
  EXPECT_DOUBLE_EQ(r.low, 2.0);
  EXPECT_DOUBLE_EQ(r.high, 2.0);
}

}  // namespace
}  // namespace kc::native
