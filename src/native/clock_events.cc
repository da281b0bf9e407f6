#include "native/clock_events.h"

#include <cstdio>
#include <utility>

#include "native/span_findings.h"

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

// "sw power cap" (or the unknown bit) for one set bit.
std::string NameOfBit(uint64_t bit) {
  for (const ReasonName& reason : kReasonNames) {
    if (reason.bit == bit) return reason.name;
  }
  return "unknown (" + Hex(bit) + ")";
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
  SpanFindings found;
  AddClockFindings(start, end, found);
  return std::move(found.flags);
}

}  // namespace kc::native
