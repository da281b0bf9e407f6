#include "native/clock_events.h"

#include <cmath>
#include <cstdio>
#include <optional>

namespace kc::native {
namespace {

struct ReasonName {
  uint64_t bit;
  const char* name;
};

constexpr ReasonName kReasonNames[] = {
    {kClockEventGpuIdle, "gpu idle"},
    {kClockEventApplicationsClocksSetting, "applications clocks setting"},
    {kClockEventSwPowerCap, "sw power cap"},
    {kClockEventHwSlowdown, "hw slowdown"},
    {kClockEventSyncBoost, "sync boost"},
    {kClockEventSwThermalSlowdown, "sw thermal slowdown"},
    {kClockEventHwThermalSlowdown, "hw thermal slowdown"},
    {kClockEventHwPowerBrakeSlowdown, "hw power brake slowdown"},
    {kClockEventDisplayClockSetting, "display clock setting"},
};

std::string Hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string Mhz(const std::optional<uint32_t>& value) {
  return value ? std::to_string(*value) : std::string("?");
}

// Both known and different (a field one snapshot could not read is no evidence of a change).
bool BothDiffer(const std::optional<uint32_t>& a, const std::optional<uint32_t>& b) {
  return a && b && *a != *b;
}

// "sw power cap" (or the unknown bit) for one set bit.
std::string NameOfBit(uint64_t bit) {
  for (const ReasonName& reason : kReasonNames) {
    if (reason.bit == bit) return reason.name;
  }
  return "unknown (" + Hex(bit) + ")";
}

void FlagSmClockChange(const GpuSnapshot& start, const GpuSnapshot& end,
                       std::vector<std::string>& flags) {
  if (!start.sm_mhz || !end.sm_mhz || *start.sm_mhz == 0) return;
  double change = (static_cast<double>(*end.sm_mhz) - *start.sm_mhz) / *start.sm_mhz;
  if (std::fabs(change) <= kSmClockChangeLimit) return;
  char text[160];
  std::snprintf(text, sizeof text, "sm clock changed by %+.1f%% during the span (%u -> %u MHz)",
                change * 100, *start.sm_mhz, *end.sm_mhz);
  std::string flag = text;
  if (start.clock_event_reasons && (*start.clock_event_reasons & kClockEventGpuIdle)) {
    flag += "; the gpu was idle at the start";
  }
  flags.push_back(std::move(flag));
}

void FlagThrottleReasons(const GpuSnapshot& start, const GpuSnapshot& end,
                         std::vector<std::string>& flags) {
  uint64_t at_start = start.clock_event_reasons.value_or(0) & ~kBenignClockEvents;
  uint64_t at_end = end.clock_event_reasons.value_or(0) & ~kBenignClockEvents;
  for (uint64_t remaining = at_start | at_end; remaining != 0; remaining &= remaining - 1) {
    uint64_t bit = remaining & (~remaining + 1);  // lowest set bit
    const char* when = (at_start & bit) && (at_end & bit) ? "at the start and the end"
                       : (at_start & bit)                 ? "at the start"
                                                          : "at the end";
    flags.push_back("throttle reason \"" + NameOfBit(bit) + "\" active " + when);
  }
}

void FlagApplicationClocks(const GpuSnapshot& start, const GpuSnapshot& end,
                           std::vector<std::string>& flags) {
  if (BothDiffer(start.app_sm_mhz, end.app_sm_mhz) ||
      BothDiffer(start.app_mem_mhz, end.app_mem_mhz)) {
    flags.push_back("application clocks changed during the span (sm " + Mhz(start.app_sm_mhz) +
                    " -> " + Mhz(end.app_sm_mhz) + " MHz, mem " + Mhz(start.app_mem_mhz) + " -> " +
                    Mhz(end.app_mem_mhz) + " MHz)");
    return;
  }
  if (BothDiffer(end.app_sm_mhz, end.default_app_sm_mhz) ||
      BothDiffer(end.app_mem_mhz, end.default_app_mem_mhz)) {
    flags.push_back("application clocks differ from their defaults (sm " + Mhz(end.app_sm_mhz) +
                    " vs " + Mhz(end.default_app_sm_mhz) + " MHz, mem " + Mhz(end.app_mem_mhz) +
                    " vs " + Mhz(end.default_app_mem_mhz) + " MHz)");
  }
}

}  // namespace

std::vector<std::string> ClockEventReasonNames(uint64_t reasons) {
  std::vector<std::string> names;
  for (uint64_t remaining = reasons; remaining != 0; remaining &= remaining - 1) {
    names.push_back(NameOfBit(remaining & (~remaining + 1)));
  }
  return names;
}

std::vector<std::string> ClockFlags(const GpuSnapshot& start, const GpuSnapshot& end) {
  std::vector<std::string> flags;
  FlagSmClockChange(start, end, flags);
  FlagThrottleReasons(start, end, flags);
  FlagApplicationClocks(start, end, flags);
  return flags;
}

}  // namespace kc::native
