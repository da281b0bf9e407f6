#include "native/clock_events.h"

#include <gtest/gtest.h>

namespace kc::native {
namespace {

GpuSnapshot Snapshot(uint32_t sm_mhz, uint64_t reasons) {
  GpuSnapshot snapshot;
  snapshot.sm_mhz = sm_mhz;
  snapshot.clock_event_reasons = reasons;
  snapshot.app_sm_mhz = 1980;
  snapshot.default_app_sm_mhz = 1980;
  snapshot.app_mem_mhz = 3201;
  snapshot.default_app_mem_mhz = 3201;
  return snapshot;
}

TEST(ClockEventReasonNames, NamesBitsInOrder) {
  EXPECT_TRUE(ClockEventReasonNames(0).empty());
  EXPECT_EQ(ClockEventReasonNames(kClockEventSwPowerCap | kClockEventGpuIdle),
            (std::vector<std::string>{"gpu idle", "sw power cap"}));
  EXPECT_EQ(ClockEventReasonNames(0x1ff).size(), 9u);
  EXPECT_EQ(ClockEventReasonNames(0x20), std::vector<std::string>{"sw thermal slowdown"});
}

TEST(ClockEventReasonNames, UnknownBitsAreShownInHex) {
  EXPECT_EQ(ClockEventReasonNames(0x200 | kClockEventHwSlowdown),
            (std::vector<std::string>{"hw slowdown", "unknown (0x200)"}));
}

// The clock rules themselves are span_findings_test.cc's; ClockFlags is their flags alone.
TEST(ClockFlags, OnlyTheFlagsOfAddClockFindings) {
  // A power cap and a clock drop are conditions: not returned.
  EXPECT_TRUE(ClockFlags(Snapshot(1980, kClockEventSwPowerCap), Snapshot(1755, 0)).empty());
  GpuSnapshot end = Snapshot(1980, 0);
  end.app_sm_mhz = 1410;
  EXPECT_EQ(ClockFlags(Snapshot(1980, 0), end),
            std::vector<std::string>{"application clocks changed during the span (sm 1980 -> "
                                     "1410 MHz, mem 3201 -> 3201 MHz)"});
}

}  // namespace
}  // namespace kc::native
