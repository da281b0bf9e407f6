#include "base/clock.h"

#include <time.h>

#include <chrono>
#include <limits>

#include <gtest/gtest.h>

namespace kc {
namespace {

using namespace std::chrono_literals;

TEST(Clock, NowNsIsClockMonotonic) {
  // Workers stamp with clock_gettime(CLOCK_MONOTONIC); the server compares (base/clock.h).
  timespec before_ts, after_ts;
  ::clock_gettime(CLOCK_MONOTONIC, &before_ts);
  const int64_t now = NowNs();
  ::clock_gettime(CLOCK_MONOTONIC, &after_ts);
  const int64_t before = before_ts.tv_sec * int64_t{1'000'000'000} + before_ts.tv_nsec;
  const int64_t after = after_ts.tv_sec * int64_t{1'000'000'000} + after_ts.tv_nsec;
  EXPECT_LE(before, now);
  EXPECT_LE(now, after);
}

TEST(Clock, ToNsCountsFromTheEpoch) {
  EXPECT_EQ(ToNs(Clock::time_point{}), 0);
  EXPECT_EQ(ToNs(Clock::time_point{} + 1500us), 1'500'000);
}

TEST(Clock, MillisecondsKeepTheFraction) {
  EXPECT_DOUBLE_EQ(ToMilliseconds(1500us), 1.5);
  EXPECT_DOUBLE_EQ(ToMilliseconds(2s), 2000.0);
  const Clock::time_point t0{};
  EXPECT_DOUBLE_EQ(MillisecondsBetween(t0, t0 + 250us), 0.25);
  EXPECT_DOUBLE_EQ(MillisecondsBetween(t0 + 1ms, t0), -1.0);
}

TEST(Clock, MillisecondsSinceGrows) {
  const auto start = Clock::now() - 5ms;
  EXPECT_GE(MillisecondsSince(start), 5.0);
}

TEST(Clock, MillisecondsLeftIsZeroOncePassed) {
  EXPECT_EQ(MillisecondsLeft(Clock::now() - 1s), 0);
  EXPECT_EQ(MillisecondsLeft(Clock::time_point{}), 0);
}

TEST(Clock, MillisecondsLeftRoundsDown) {
  const int left = MillisecondsLeft(Clock::now() + 10s);
  EXPECT_LE(left, 10'000);
  EXPECT_GE(left, 9'000);
  EXPECT_EQ(MillisecondsLeft(Clock::now() + 900us), 0);
}

TEST(Clock, MillisecondsLeftFitsPoll) {
  EXPECT_EQ(MillisecondsLeft(Clock::time_point::max()), std::numeric_limits<int>::max());
}

}  // namespace
}  // namespace kc
