// Clock-event ("throttle") reasons and their names (spec/benchmark.md §9.6; issue 9 "refuse or
// flag clock changes"). What a timed span's start and end GpuSnapshots mean for the result, flag
// or condition, is span_findings.h's AddClockFindings.
//
// The bits are NVML's nvmlClocksEventReasons (formerly nvmlClocksThrottleReasons), copied here
// because the build machines have no nvml.h; NVML keeps them stable across driver versions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "native/gpu_snapshot.h"

namespace kc::native {

inline constexpr uint64_t kClockEventGpuIdle = 0x1;
inline constexpr uint64_t kClockEventApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kClockEventSwPowerCap = 0x4;
inline constexpr uint64_t kClockEventHwSlowdown = 0x8;
inline constexpr uint64_t kClockEventSyncBoost = 0x10;
inline constexpr uint64_t kClockEventSwThermalSlowdown = 0x20;
inline constexpr uint64_t kClockEventHwThermalSlowdown = 0x40;
inline constexpr uint64_t kClockEventHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kClockEventDisplayClockSetting = 0x100;

// Reasons not even worth a condition: an idle GPU (the start of a span may catch it before the
// clocks ramp) and clocks held at the configured application clocks.
inline constexpr uint64_t kBenignClockEvents =
    kClockEventGpuIdle | kClockEventApplicationsClocksSetting;

// An SM clock that moved more than this fraction between start and end is reported (a condition).
inline constexpr double kSmClockChangeLimit = 0.05;

// Lower-case names in bit order, "sw power cap"; unknown bits as "unknown (0x200)".
std::vector<std::string> ClockEventReasonNames(uint64_t reasons);

// Only the flags of AddClockFindings (span_findings.h), for callers not yet reporting conditions:
// today the application clocks changing during the span. The conditions are dropped.
std::vector<std::string> ClockFlags(const GpuSnapshot& start, const GpuSnapshot& end);

}  // namespace kc::native
