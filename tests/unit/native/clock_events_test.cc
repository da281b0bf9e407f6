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

TEST(ClockFlags, SteadyClocksAndBenignReasonsRaiseNothing) {
  // 1980 -> 1900 MHz is -4.0%, inside the 5% limit.
  EXPECT_TRUE(ClockFlags(Snapshot(1980, kClockEventApplicationsClocksSetting),
                         Snapshot(1900, kClockEventGpuIdle))
                  .empty());
}

TEST(ClockFlags, SmClockDropBeyondFivePercentIsFlagged) {
  // (1755 - 1980) / 1980 = -11.36%.
  std::vector<std::string> flags = ClockFlags(Snapshot(1980, 0), Snapshot(1755, 0));
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0], "sm clock changed by -11.4% during the span (1980 -> 1755 MHz)");
}

TEST(ClockFlags, ClockRiseFromIdleSaysTheGpuWasIdle) {
  std::vector<std::string> flags = ClockFlags(Snapshot(345, kClockEventGpuIdle), Snapshot(1980, 0));
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_NE(flags[0].find("+473.9%"), std::string::npos) << flags[0];
  EXPECT_NE(flags[0].find("the gpu was idle at the start"), std::string::npos) << flags[0];
}

TEST(ClockFlags, ThrottleReasonsAreNamedWithWhen) {
  std::vector<std::string> flags =
      ClockFlags(Snapshot(1980, kClockEventSwPowerCap | kClockEventHwSlowdown),
                 Snapshot(1980, kClockEventSwPowerCap | kClockEventSwThermalSlowdown));
  EXPECT_EQ(flags, (std::vector<std::string>{
                       "throttle reason \"sw power cap\" active at the start and the end",
                       "throttle reason \"hw slowdown\" active at the start",
                       "throttle reason \"sw thermal slowdown\" active at the end"}));
}

TEST(ClockFlags, ApplicationClockChangeDuringTheSpanIsFlagged) {
  GpuSnapshot end = Snapshot(1980, 0);
  end.app_sm_mhz = 1410;
  std::vector<std::string> flags = ClockFlags(Snapshot(1980, 0), end);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0],
            "application clocks changed during the span (sm 1980 -> 1410 MHz, mem 3201 -> 3201 "
            "MHz)");
}

TEST(ClockFlags, NonDefaultApplicationClocksAreFlagged) {
  GpuSnapshot start = Snapshot(1410, 0), end = Snapshot(1410, 0);
  start.app_sm_mhz = end.app_sm_mhz = 1410;
  std::vector<std::string> flags = ClockFlags(start, end);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0],
            "application clocks differ from their defaults (sm 1410 vs 1980 MHz, mem 3201 vs 3201 "
            "MHz)");
}

TEST(ClockFlags, MissingFieldsAreNotEvidence) {
  GpuSnapshot start, end;  // nothing readable
  EXPECT_TRUE(ClockFlags(start, end).empty());
  start = Snapshot(1980, 0);
  end.sm_mhz = 1000;  // end has no application clocks and no reasons
  std::vector<std::string> flags = ClockFlags(start, end);
  ASSERT_EQ(flags.size(), 1u);  // only the clock drop
  EXPECT_EQ(flags[0].rfind("sm clock changed", 0), 0u);
}

}  // namespace
}  // namespace kc::native
