#include "pool/gpu_census.h"

#include <unistd.h>

#include <algorithm>

namespace kc::pool {

namespace {

constexpr int kMaxAncestry = 64;      // deeper than any real tree; stops a loop
constexpr unsigned kMaxListed = 512;  // processes NVML may list on one GPU

bool DescendsFrom(int pid, int ancestor, const ProcessLookup& lookup) {
  for (int depth = 0; depth < kMaxAncestry && pid > 1; ++depth) {
    if (pid == ancestor) return true;
    const auto stat = lookup(pid);
    if (!stat) return false;
    pid = stat->ppid;
  }
  return pid == ancestor;
}

std::optional<ProcStat> ReadStat(int pid) {
  StatusOr<ProcStat> stat = ReadProcStat("/proc/" + std::to_string(pid));
  if (!stat.ok()) return std::nullopt;
  return *std::move(stat);
}

}  // namespace

bool InProcessTree(int pid, int root) {
  return DescendsFrom(pid, root, ReadStat);
}

CensusReading Classify(const std::vector<int>& holders, int timed_worker, int server,
                       const ProcessLookup& lookup) {
  CensusReading reading;
  bool worker_listed = false;
  for (int pid : holders)
    worker_listed = worker_listed || DescendsFrom(pid, timed_worker, lookup);
  if (!worker_listed) {
    reading.reason_if_not =
        "NVML did not list the timed worker among the GPU's processes: it reports PIDs of "
        "another PID namespace";
    return reading;
  }
  reading.meaningful = true;
  for (int pid : holders) {
    if (DescendsFrom(pid, server, lookup)) continue;
    const auto stat = lookup(pid);
    reading.foreign.push_back(
        {pid, stat ? stat->comm : std::string("(not in the server's PID namespace)")});
  }
  return reading;
}

StatusOr<GpuCensus> GpuCensus::ForGpu(const std::string& uuid) {
  KC_ASSIGN_OR_RETURN(const NvmlLibrary* nvml, NvmlLibrary::Get());
  if (nvml->device_get_compute_running_processes == nullptr ||
      nvml->device_get_handle_by_uuid == nullptr) {
    return UnavailableError(
        "NVML lacks nvmlDeviceGetComputeRunningProcesses_v3 or nvmlDeviceGetHandleByUUID "
        "(a driver older than 510)");
  }
  NvmlDevice device = nullptr;
  const NvmlReturn found = nvml->device_get_handle_by_uuid(uuid.c_str(), &device);
  if (found != kNvmlSuccess) {
    return UnavailableError("NVML has no GPU " + uuid + ": " + nvml->ErrorText(found));
  }
  return GpuCensus(nvml, device);
}

CensusReading GpuCensus::Take(int timed_worker) const {
  std::vector<NvmlProcessInfo> listed(kMaxListed);
  unsigned count = kMaxListed;
  const NvmlReturn read =
      nvml_->device_get_compute_running_processes(device_, &count, listed.data());
  if (read != kNvmlSuccess) {
    CensusReading reading;
    reading.reason_if_not = "NVML could not list the GPU's processes: " + nvml_->ErrorText(read);
    return reading;
  }
  std::vector<int> holders;
  for (unsigned i = 0; i < count && i < kMaxListed; ++i)
    holders.push_back(static_cast<int>(listed[i].pid));
  return Classify(holders, timed_worker, static_cast<int>(::getpid()), ReadStat);
}

StatusOr<std::vector<GpuUseSample>> GpuCensus::UseAfter(int64_t after_us) const {
  // The driver sizes its answer by its own sample buffer, not by the processes (72 on an H200).
  std::vector<NvmlProcessUtilizationSample> read(kMaxListed);
  unsigned count = kMaxListed;
  const NvmlReturn result = nvml_->device_get_process_utilization(
      device_, read.data(), &count,
      static_cast<unsigned long long>(std::max<int64_t>(after_us, 0)));
  std::vector<GpuUseSample> samples;
  if (result == kNvmlErrorNotFound) return samples;  // nothing newer
  if (result != kNvmlSuccess) {
    return UnavailableError("NVML could not sample the GPU's processes: " +
                            nvml_->ErrorText(result));
  }
  for (unsigned i = 0; i < count && i < kMaxListed; ++i) {
    samples.push_back({static_cast<int>(read[i].pid), static_cast<int64_t>(read[i].timestamp_us),
                       static_cast<int>(read[i].sm_util)});
  }
  return samples;
}

}  // namespace kc::pool
