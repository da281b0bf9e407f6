#include "pool/duty_meter.h"

#include <gtest/gtest.h>

namespace kc::pool {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(DutyMeterTest, IdleGpuHasNoDuty) {
  DutyMeter meter(0);
  const auto reading = meter.Read(10 * kSecond);
  EXPECT_EQ(reading.inside_seconds, 0);
  EXPECT_EQ(reading.since_start, 0);
  EXPECT_EQ(reading.last_window, 0);
  EXPECT_DOUBLE_EQ(reading.window_seconds, 10);
}

TEST(DutyMeterTest, ClosedAndOpenSpansCount) {
  DutyMeter meter(0);
  meter.SpanBegan(1 * kSecond);
  meter.SpanEnded(3 * kSecond);
  meter.SpanBegan(6 * kSecond);
  const auto reading = meter.Read(8 * kSecond);  // 2 s closed + 2 s open, of 8 s
  EXPECT_DOUBLE_EQ(reading.inside_seconds, 4);
  EXPECT_DOUBLE_EQ(reading.since_start, 0.5);
  EXPECT_DOUBLE_EQ(reading.last_window, 0.5);
}

TEST(DutyMeterTest, SaysWhetherASpanIsOpen) {  // the dashboard's "span in progress"
  DutyMeter meter(0);
  EXPECT_FALSE(meter.Read(1 * kSecond).inside);
  meter.SpanBegan(1 * kSecond);
  meter.SpanBegan(2 * kSecond);
  meter.SpanEnded(3 * kSecond);
  EXPECT_TRUE(meter.Read(3 * kSecond).inside);  // one of two still open
  meter.SpanEnded(4 * kSecond);
  EXPECT_FALSE(meter.Read(4 * kSecond).inside);
}

TEST(DutyMeterTest, OverlappingSpansCountOnce) {
  DutyMeter meter(0);
  meter.SpanBegan(0);
  meter.SpanBegan(1 * kSecond);
  meter.SpanEnded(2 * kSecond);
  meter.SpanEnded(4 * kSecond);
  meter.SpanEnded(5 * kSecond);  // unmatched: ignored
  const auto reading = meter.Read(8 * kSecond);
  EXPECT_DOUBLE_EQ(reading.inside_seconds, 4);
  EXPECT_DOUBLE_EQ(reading.since_start, 0.5);
}

TEST(DutyMeterTest, WindowCoversTheLastMinuteOnly) {
  DutyMeter meter(0);
  meter.SpanBegan(0);
  meter.SpanEnded(100 * kSecond);  // busy for the first 100 s
  meter.SpanBegan(130 * kSecond);
  meter.SpanEnded(145 * kSecond);  // then 15 s of the last minute
  const auto reading = meter.Read(160 * kSecond);
  EXPECT_DOUBLE_EQ(reading.window_seconds, 60);
  EXPECT_DOUBLE_EQ(reading.last_window, 15.0 / 60);
  EXPECT_DOUBLE_EQ(reading.since_start, 115.0 / 160);
  // An interval reaching into the window counts for its part inside it.
  const auto later = meter.Read(190 * kSecond);  // window [130, 190]: 15 s
  EXPECT_DOUBLE_EQ(later.last_window, 15.0 / 60);
  const auto much_later = meter.Read(300 * kSecond);
  EXPECT_EQ(much_later.last_window, 0);
}

TEST(DutyMeterTest, ASpanOpenSinceBeforeTheWindowFillsIt) {
  DutyMeter meter(0);
  meter.SpanBegan(10 * kSecond);  // a long span, still open
  const auto reading = meter.Read(200 * kSecond);
  EXPECT_DOUBLE_EQ(reading.last_window, 1.0);
  EXPECT_DOUBLE_EQ(reading.since_start, 190.0 / 200);
}

}  // namespace
}  // namespace kc::pool
