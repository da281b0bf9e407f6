// SpanFindings: what the benchmark's defences saw around one timed span, split by what it means
// for the result (docs/benchmark-integrity.md "Flags and conditions"):
//   - flags: evidence that the measurement was tampered with; any flag makes the server's
//     integrity.trusted false;
//   - conditions: the machine's state and honest circumstances (a power cap left over from the
//     previous kernel, the operator's application clocks, a compile helper holding no GPU);
//     reported in integrity.conditions, trust unaffected.
//
// Pure: the readings come in (GpuSnapshot from NVML, ProcessScan from /proc), sentences go out.
//
//   SpanFindings found;
//   AddClockFindings(start_gpu, end_gpu, found);
//   AddProcessFindings(start_scan, "at the start of", found);
//   AddProcessFindings(end_scan, "at the end of", found);
#pragma once

#include <string>
#include <vector>

#include "native/gpu_snapshot.h"
#include "native/process_scan.h"

namespace kc::native {

struct SpanFindings {
  std::vector<std::string> flags;       // evidence that the measurement was tampered with
  std::vector<std::string> conditions;  // conditions of the machine, reported; trust unaffected
};

// From the NVML readings at the start and the end of the timed loop. Take `start` after
// warm-up: an idle GPU's clock is far below its clock under load.
//   flag:      the application clocks changed between start and end (someone set clocks during
//              the measurement);
//   condition: a clock-event reason outside kBenignClockEvents active at the start or the end
//              (each named); the SM clock moved more than kSmClockChangeLimit; application
//              clocks that differ from their defaults at both ends.
// A field missing from either snapshot is no evidence and is not reported (its null is in the
// snapshot itself).
void AddClockFindings(const GpuSnapshot& start, const GpuSnapshot& end, SpanFindings& out);

// Other processes of the worker's PID namespace seen at one end of the timed calls; `when` is
// "at the start of" or "at the end of". One sentence each, with pid and comm:
//   flag:      the process holds the GPU (holds_gpu true) or hides whether it does (holds_gpu
//              empty: its descriptors could not be read);
//   condition: the process holds no GPU device (holds_gpu false: a compile helper, a shell).
// A scan that is not meaningful (outside a sandbox) adds nothing; its reason is in the scan.
void AddProcessFindings(const ProcessScan& scan, const char* when, SpanFindings& out);

}  // namespace kc::native
