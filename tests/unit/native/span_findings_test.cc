#include "native/span_findings.h"

#include <gtest/gtest.h>

#include "fake_nvml.h"
#include "native/clock_events.h"
#include "native/nvml_snapshot.h"

namespace kc::native {
namespace {

using Sentences = std::vector<std::string>;

// A reading of a steady H200 at its default application clocks.
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

SpanFindings Clocks(const GpuSnapshot& start, const GpuSnapshot& end) {
  SpanFindings found;
  AddClockFindings(start, end, found);
  return found;
}

OtherProcess Process(int pid, std::string comm, std::optional<bool> holds_gpu) {
  OtherProcess process;
  process.pid = pid;
  process.ppid = 2;
  process.state = 'S';
  process.comm = std::move(comm);
  process.holds_gpu = holds_gpu;
  return process;
}

SpanFindings Processes(std::vector<OtherProcess> processes, bool meaningful = true) {
  ProcessScan scan;
  scan.meaningful = meaningful;
  scan.processes = std::move(processes);
  SpanFindings found;
  AddProcessFindings(scan, "at the start of", found);
  return found;
}

TEST(AddClockFindings, ASwPowerCapLeftOverFromAPreviousKernelIsAConditionNotAFlag) {
  // Both readings come through the real NVML reading code, from the fake library.
  FakeNvml* fake = FakeNvmlAt(KC_FAKE_NVML);
  ASSERT_NE(fake, nullptr) << dlerror();
  *fake = FakeNvml{};
  fake->reasons = kClockEventSwPowerCap;
  StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(KC_FAKE_NVML);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  StatusOr<GpuSnapshot> start = ReadNvmlSnapshot(*nvml, fake->bus_id);
  StatusOr<GpuSnapshot> end = ReadNvmlSnapshot(*nvml, fake->bus_id);
  ASSERT_TRUE(start.ok() && end.ok());
  ASSERT_EQ(start->clock_event_reasons, kClockEventSwPowerCap);

  SpanFindings found = Clocks(*start, *end);
  EXPECT_TRUE(found.flags.empty());
  EXPECT_EQ(found.conditions,
            Sentences{"throttle reason \"sw power cap\" active at the start and the end"});
}

TEST(AddClockFindings, ThermalSlowdownsAreConditionsNamedWithWhen) {
  SpanFindings found =
      Clocks(Snapshot(1980, kClockEventHwThermalSlowdown | kClockEventHwPowerBrakeSlowdown),
             Snapshot(1980, kClockEventSwThermalSlowdown | kClockEventSyncBoost));
  EXPECT_TRUE(found.flags.empty());
  EXPECT_EQ(found.conditions, (Sentences{
                                  "throttle reason \"sync boost\" active at the end",
                                  "throttle reason \"sw thermal slowdown\" active at the end",
                                  "throttle reason \"hw thermal slowdown\" active at the start",
                                  "throttle reason \"hw power brake slowdown\" active at the start",
                              }));
}

TEST(AddClockFindings, IdleAndApplicationClocksSettingAreNotEvenConditions) {
  // 1980 -> 1900 MHz is -4.0%, inside the 5% limit.
  SpanFindings found = Clocks(Snapshot(1980, kClockEventApplicationsClocksSetting),
                              Snapshot(1900, kClockEventGpuIdle));
  EXPECT_TRUE(found.flags.empty());
  EXPECT_TRUE(found.conditions.empty());
}

TEST(AddClockFindings, SmClockMoveBeyondFivePercentIsACondition) {
  // (1755 - 1980) / 1980 = -11.36%.
  SpanFindings found = Clocks(Snapshot(1980, 0), Snapshot(1755, 0));
  EXPECT_TRUE(found.flags.empty());
  EXPECT_EQ(found.conditions,
            Sentences{"sm clock changed by -11.4% during the span (1980 -> 1755 MHz)"});
}

TEST(AddClockFindings, ClockRiseFromIdleSaysTheGpuWasIdle) {
  SpanFindings found = Clocks(Snapshot(345, kClockEventGpuIdle), Snapshot(1980, 0));
  ASSERT_EQ(found.conditions.size(), 1u);
  EXPECT_NE(found.conditions[0].find("+473.9%"), std::string::npos) << found.conditions[0];
  EXPECT_NE(found.conditions[0].find("the gpu was idle at the start"), std::string::npos);
}

TEST(AddClockFindings, ApplicationClocksChangedDuringTheSpanAreAFlag) {
  GpuSnapshot end = Snapshot(1980, 0);
  end.app_sm_mhz = 1410;
  SpanFindings found = Clocks(Snapshot(1980, 0), end);
  EXPECT_EQ(found.flags, Sentences{"application clocks changed during the span (sm 1980 -> 1410 "
                                   "MHz, mem 3201 -> 3201 MHz)"});
  EXPECT_TRUE(found.conditions.empty());  // not also "differ from their defaults"
}

TEST(AddClockFindings, NonDefaultApplicationClocksAtBothEndsAreACondition) {
  GpuSnapshot start = Snapshot(1410, 0), end = Snapshot(1410, 0);
  start.app_sm_mhz = end.app_sm_mhz = 1410;
  SpanFindings found = Clocks(start, end);
  EXPECT_TRUE(found.flags.empty());
  EXPECT_EQ(found.conditions, Sentences{"application clocks differ from their defaults (sm 1410 "
                                        "vs 1980 MHz, mem 3201 vs 3201 MHz)"});
}

TEST(AddClockFindings, MissingFieldsAreNotReported) {
  GpuSnapshot start, end;  // nothing readable
  SpanFindings found = Clocks(start, end);
  EXPECT_TRUE(found.flags.empty());
  EXPECT_TRUE(found.conditions.empty());
  start = Snapshot(1980, 0);
  start.app_sm_mhz = 1410;  // non-default at the start, unknown at the end
  end.sm_mhz = 1000;        // end has no application clocks and no reasons
  found = Clocks(start, end);
  EXPECT_TRUE(found.flags.empty());
  ASSERT_EQ(found.conditions.size(), 1u);  // only the clock drop
  EXPECT_EQ(found.conditions[0].rfind("sm clock changed", 0), 0u);
}

TEST(AddProcessFindings, AHelperHoldingNoGpuIsACondition) {
  SpanFindings found = Processes({Process(7, "python3", false)});
  EXPECT_TRUE(found.flags.empty());
  EXPECT_EQ(found.conditions,
            Sentences{"another process ran in the worker's namespace at the start of the timed "
                      "calls: pid 7 (python3), does not hold the GPU"});
}

TEST(AddProcessFindings, AProcessHoldingTheGpuIsAFlag) {
  SpanFindings found = Processes({Process(9, "helper", true)});
  EXPECT_TRUE(found.conditions.empty());
  EXPECT_EQ(found.flags, Sentences{"another process ran in the worker's namespace at the start of "
                                   "the timed calls: pid 9 (helper), holds the GPU"});
}

TEST(AddProcessFindings, HiddenDescriptorsAreAFlag) {
  OtherProcess hidden = Process(11, "sneaky", std::nullopt);
  hidden.fd_error = "/proc/11/fd: Permission denied";
  SpanFindings found = Processes({hidden, Process(12, "python3", false)});
  EXPECT_EQ(found.flags,
            Sentences{"another process ran in the worker's namespace at the start of the timed "
                      "calls: pid 11 (sneaky), may hold the GPU (its descriptors are hidden: "
                      "/proc/11/fd: Permission denied)"});
  EXPECT_EQ(found.conditions.size(), 1u);
}

TEST(AddProcessFindings, AScanThatIsNotMeaningfulAddsNothing) {
  SpanFindings found = Processes({Process(7, "bash", true)}, /*meaningful=*/false);
  EXPECT_TRUE(found.flags.empty());
  EXPECT_TRUE(found.conditions.empty());
}

TEST(SpanFindings, NothingWrongLeavesBothEmpty) {
  SpanFindings found;
  AddClockFindings(Snapshot(1980, 0), Snapshot(1975, 0), found);
  AddProcessFindings(ProcessScan{.meaningful = true}, "at the start of", found);
  AddProcessFindings(ProcessScan{.meaningful = true}, "at the end of", found);
  EXPECT_TRUE(found.flags.empty());
  EXPECT_TRUE(found.conditions.empty());
}

}  // namespace
}  // namespace kc::native
