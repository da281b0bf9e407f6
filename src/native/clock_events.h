// Clock-event ("throttle") reasons and the flags a timed span earns from its start and end
// GpuSnapshots (spec/benchmark.md §9.6; issue 9 "refuse or flag clock changes").
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

// Reasons that say nothing against a measurement: an idle GPU (the start of a span may catch
// it before the clocks ramp) and clocks held at the configured application clocks.
inline constexpr uint64_t kBenignClockEvents =
    kClockEventGpuIdle | kClockEventApplicationsClocksSetting;

// An SM clock that moved more than this fraction between start and end is flagged.
inline constexpr double kSmClockChangeLimit = 0.05;

// Lower-case names in bit order, "sw power cap"; unknown bits as "unknown (0x200)".
std::vector<std::string> ClockEventReasonNames(uint64_t reasons);

// Human-readable flags, empty when nothing is wrong:
//   - the SM clock moved by more than 5% from start to end;
//   - a reason outside kBenignClockEvents was active at the start or the end (each named);
//   - the application clocks changed during the span, or differ from their defaults.
// Fields missing from either snapshot are not flagged (their null is in the snapshot itself).
// Take `start` after warm-up: an idle GPU's clock is far below its clock under load.
std::vector<std::string> ClockFlags(const GpuSnapshot& start, const GpuSnapshot& end);

}  // namespace kc::native
