// GpuCensus: which processes hold a GPU while a benchmark on it times, told apart (issue 25).
//
// NVML lists every process with a CUDA context on the GPU. The server's own are its descendants:
// the timed worker, stand-bys creating their contexts, retired workers destroying theirs, other
// requests' workers waiting for the lease. Anything else is foreign: another server, a process
// started outside KCoral, a worker's orphan. The server's own house-keeping beside a span is a
// condition (timing_spans.housekeeping_beside, counted by the arbiter); a foreign process
// holding the GPU is a flag: no one scheduled its kernels around the timed ones.
//
// NVML reports PIDs as the driver sees them. Where that is not the server's PID namespace (a
// container without the host's PIDs), the timed worker is missing from the list: the census
// then says it cannot tell processes apart instead of calling everyone foreign.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/nvml_library.h"
#include "base/proc_stat.h"
#include "base/status.h"

namespace kc::pool {

struct GpuHolder {
  int pid = 0;
  std::string name;  // its comm, or why it is unknown
};

struct CensusReading {
  bool meaningful = false;
  std::string reason_if_not;
  std::vector<GpuHolder> foreign;
};

// A process's parent and name: /proc/<pid>/stat in production (ReadProcStat), a table in tests;
// nullopt for a process this namespace does not have.
using ProcessLookup = std::function<std::optional<ProcStat>(int pid)>;

// One process's SM use over the driver's last sample period, which ended at `end_us` (CPU time,
// microseconds since the epoch).
struct GpuUseSample {
  int pid = 0;
  int64_t end_us = 0;
  int sm_percent = 0;
};

// Whether `pid` is `root` or one of its descendants, as /proc/<pid>/stat says.
bool InProcessTree(int pid, int root);

// Pure: `holders` as NVML listed them; `timed_worker` and `server` are PIDs of this namespace.
CensusReading Classify(const std::vector<int>& holders, int timed_worker, int server,
                       const ProcessLookup& lookup);

class GpuCensus {
 public:
  // For the GPU with this UUID; kUnavailable (with the reason) where NVML cannot list its
  // processes.
  static StatusOr<GpuCensus> ForGpu(const std::string& uuid);

  // Thread-safe (NVML is).
  CensusReading Take(int timed_worker) const;

  // Whether this driver samples each process's use (nvmlDeviceGetProcessUtilization).
  bool samples_use() const { return nvml_->device_get_process_utilization != nullptr; }
  // The latest sample of each process that has one ending after `after_us`; empty where none
  // does. Requires samples_use().
  StatusOr<std::vector<GpuUseSample>> UseAfter(int64_t after_us) const;

 private:
  GpuCensus(const NvmlLibrary* nvml, NvmlDevice device) : nvml_(nvml), device_(device) {}

  const NvmlLibrary* nvml_;
  NvmlDevice device_;
};

}  // namespace kc::pool
