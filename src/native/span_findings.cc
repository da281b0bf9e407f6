#include "native/span_findings.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "native/clock_events.h"

namespace kc::native {
namespace {

std::string Mhz(const std::optional<uint32_t>& value) {
  return value ? std::to_string(*value) : std::string("?");
}

// Both known and different (a field one snapshot could not read is no evidence of a change).
bool BothDiffer(const std::optional<uint32_t>& a, const std::optional<uint32_t>& b) {
  return a && b && *a != *b;
}

bool NonDefaultApplicationClocks(const GpuSnapshot& snapshot) {
  return BothDiffer(snapshot.app_sm_mhz, snapshot.default_app_sm_mhz) ||
         BothDiffer(snapshot.app_mem_mhz, snapshot.default_app_mem_mhz);
}

// A condition: boost clocks follow power and temperature, and a move says the kernel ran
// partly at another clock, not that anyone interfered.
void AddSmClockChange(const GpuSnapshot& start, const GpuSnapshot& end, SpanFindings& out) {
  if (!start.sm_mhz || !end.sm_mhz || *start.sm_mhz == 0) return;
  double change = (static_cast<double>(*end.sm_mhz) - *start.sm_mhz) / *start.sm_mhz;
  if (std::fabs(change) <= kSmClockChangeLimit) return;
  char text[160];
  std::snprintf(text, sizeof text, "sm clock changed by %+.1f%% during the span (%u -> %u MHz)",
                change * 100, *start.sm_mhz, *end.sm_mhz);
  std::string sentence = text;
  if (start.clock_event_reasons && (*start.clock_event_reasons & kClockEventGpuIdle)) {
    sentence += "; the gpu was idle at the start";
  }
  out.conditions.push_back(std::move(sentence));
}

// A condition: a power cap or thermal slowdown is the machine's state, often left over from the
// previous kernel; unprivileged user code cannot set it.
void AddClockEventReasons(const GpuSnapshot& start, const GpuSnapshot& end, SpanFindings& out) {
  uint64_t at_start = start.clock_event_reasons.value_or(0) & ~kBenignClockEvents;
  uint64_t at_end = end.clock_event_reasons.value_or(0) & ~kBenignClockEvents;
  for (uint64_t remaining = at_start | at_end; remaining != 0; remaining &= remaining - 1) {
    uint64_t bit = remaining & (~remaining + 1);  // lowest set bit
    const char* when = (at_start & bit) && (at_end & bit) ? "at the start and the end"
                       : (at_start & bit)                 ? "at the start"
                                                          : "at the end";
    out.conditions.push_back("throttle reason \"" + ClockEventReasonNames(bit).front() +
                             "\" active " + when);
  }
}

// Clocks set during the measurement are a flag; clocks the operator set before it (the same,
// non-default, at both ends) are a condition.
void AddApplicationClocks(const GpuSnapshot& start, const GpuSnapshot& end, SpanFindings& out) {
  if (BothDiffer(start.app_sm_mhz, end.app_sm_mhz) ||
      BothDiffer(start.app_mem_mhz, end.app_mem_mhz)) {
    out.flags.push_back("application clocks changed during the span (sm " + Mhz(start.app_sm_mhz) +
                        " -> " + Mhz(end.app_sm_mhz) + " MHz, mem " + Mhz(start.app_mem_mhz) +
                        " -> " + Mhz(end.app_mem_mhz) + " MHz)");
    return;
  }
  if (NonDefaultApplicationClocks(start) && NonDefaultApplicationClocks(end)) {
    out.conditions.push_back("application clocks differ from their defaults (sm " +
                             Mhz(end.app_sm_mhz) + " vs " + Mhz(end.default_app_sm_mhz) +
                             " MHz, mem " + Mhz(end.app_mem_mhz) + " vs " +
                             Mhz(end.default_app_mem_mhz) + " MHz)");
  }
}

}  // namespace

void AddClockFindings(const GpuSnapshot& start, const GpuSnapshot& end, SpanFindings& out) {
  AddSmClockChange(start, end, out);
  AddClockEventReasons(start, end, out);
  AddApplicationClocks(start, end, out);
}

void AddProcessFindings(const ProcessScan& scan, const char* when, SpanFindings& out) {
  if (!scan.meaningful) return;
  for (const OtherProcess& p : scan.processes) {
    std::string sentence = "another process ran in the worker's namespace " + std::string(when) +
                           " the timed calls: pid " + std::to_string(p.pid) + " (" + p.comm + "), ";
    if (!p.holds_gpu) {
      sentence += "may hold the GPU (its descriptors are hidden";
      if (!p.fd_error.empty()) sentence += ": " + p.fd_error;
      out.flags.push_back(sentence + ")");
    } else if (*p.holds_gpu) {
      out.flags.push_back(sentence + "holds the GPU");
    } else {
      out.conditions.push_back(sentence + "does not hold the GPU");
    }
  }
}

}  // namespace kc::native
