// OffLeaseMeter: GPU time a run's processes used while the run did not hold its GPU lease
// (issue 27): a thread or a child process left running across a release the engine made (a
// cpu_only run, a file upload or return), seen from outside the worker in NVML's per-process
// samples (GpuCensus::UseAfter).
//
// A sample says what share of the driver's last sample period (about 200 ms on an H200) a
// process kept the SMs busy, and when that period ended. It counts as off the lease only when
// the whole kGrace before its end lies outside every tenure of the run. The engine drains the
// GPU before it releases (gpu_runtime.py), yet on the H200 honest runs still showed a few
// percent of SM use in samples ending up to 1.4 s after a release; 2 s of grace covers them.
// A counted sample stands for the time since the same process's previous
// sample, at most kMaxPeriod (a read sees only each process's latest sample, so reads slower
// than the driver skip some): an estimate, good to about one sample period.
//
// Not thread-safe: the run's session alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "pool/gpu_census.h"

namespace kc::pool {

class OffLeaseMeter {
 public:
  static constexpr int64_t kMaxPeriodUs = 1'000'000;
  static constexpr int64_t kGraceUs = 2'000'000;      // after a tenure (above)
  static constexpr int64_t kFirstPeriodUs = 200'000;  // a process's first sample

  // Times are microseconds since the epoch, NVML's clock (UnixMicrosecondsNow()).
  explicit OffLeaseMeter(int64_t started_us) : started_us_(started_us) {}

  void Acquired(int64_t at_us);
  void Released(int64_t at_us);
  // Counts the samples of the run's own processes (`ours`, asked only of busy ones).
  void Add(const std::vector<GpuUseSample>& samples, const std::function<bool(int pid)>& ours);

  double seconds() const { return busy_us_ / 1e6; }
  int last_pid() const { return last_pid_; }  // of the last sample counted; 0: none

  // The evidence, for the event log: the first kEvidence samples counted and the run's tenures,
  // in milliseconds since the run began.
  static constexpr size_t kEvidence = 16;
  struct Counted {
    GpuUseSample sample;
    int64_t period_us;
  };
  const std::vector<Counted>& counted() const { return counted_; }
  const std::vector<std::pair<int64_t, int64_t>>& tenures() const { return tenures_; }
  int64_t started_us() const { return started_us_; }
  // Where the next read starts: late enough to skip old samples, early enough for every process.
  int64_t read_after_us() const { return std::max(started_us_, newest_us_ - kMaxPeriodUs); }

 private:
  bool Leased(int64_t from_us, int64_t to_us) const;

  const int64_t started_us_;
  std::vector<std::pair<int64_t, int64_t>> tenures_;  // [from, to]; an open one ends at INT64_MAX
  std::map<int, int64_t> last_end_us_;                // by pid: the latest sample counted or seen
  int64_t newest_us_ = 0;
  double busy_us_ = 0;
  int last_pid_ = 0;
  std::vector<Counted> counted_;
};

}  // namespace kc::pool
