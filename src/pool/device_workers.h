// DeviceWorkers: the prepared worker processes of one device ("cpu" or
// "gpu0"): its zygote, its stand-by processes, the spawner thread that keeps
// them coming, the threads that prepare them side by side and, on a GPU, the
// device's lease. GPU workers create their CUDA context before they are
// offered to a seat, and retired ones tear it down, as house-keeping: outside
// the lease, never during a neighbour's timing span (gpu_arbiter.h).
//
// Thread-safe: seats call TakeReady and Retire concurrently; the spawner
// thread alone uses the zygote.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "pool/event_sink.h"
#include "pool/gpu_census.h"
#include "pool/gpu_lease.h"
#include "pool/worker_process.h"
#include "pool/zygote.h"

namespace kc::pool {

struct DeviceSpec {
  std::string name = "cpu";  // "cpu" or "gpu<index>": seats are "<name>/w<i>"
  int gpu_index = -1;        // -1: no GPU, no lease
  std::string gpu_uuid;      // "GPU-...": workers see only it (CUDA_VISIBLE_DEVICES)
  int seats = 1;
  int standby = 1;
  std::string gpu_arch;                   // e.g. sm_90a: the target its workers describe
  std::vector<std::string> extra_env;     // e.g. TVM_FFI_CUDA_ARCH_LIST=9.0a
  std::vector<std::string> device_nodes;  // the GPU's /dev/nvidia* nodes, for the sandbox
  // GPU seconds a run's processes may use off its lease (RunRequest); 0: not watched. Above 0,
  // Start fails where NVML cannot sample the GPU's processes.
  double off_lease_bound_seconds = 0;
};

class DeviceWorkers {
 public:
  // `arbiter` holds this device's GPU (unused for "cpu") and outlives it.
  DeviceWorkers(DeviceSpec spec, WorkerLaunch launch, bool use_zygote,
                std::chrono::seconds spawn_timeout, WorkerSetup& setup, GpuArbiter& arbiter,
                EventSink& events);
  ~DeviceWorkers() { Stop(); }

  // Starts the zygote and one worker, whose describe() is returned; then the spawner.
  StatusOr<nlohmann::json> Start();
  // Blocks until a prepared worker is available; nullptr once stopping. A
  // stand-by that died while waiting is dropped (and replaced), never handed out.
  std::unique_ptr<WorkerProcess> TakeReady();
  // Kills `worker`'s tree; on a GPU as house-keeping of kind kContext (a
  // context destroyed; gpu_arbiter.h says when that may overlap a timing span).
  void Retire(std::unique_ptr<WorkerProcess> worker);
  void Stop();

  const DeviceSpec& spec() const { return spec_; }
  // Its processes now, for the dashboard: prepared stand-bys, those being started or
  // prepared, and retired ones whose context is still being torn down.
  struct Census {
    int busy = 0;  // seats of this device running a program
    int standby = 0;
    int preparing = 0;
    int retiring = 0;
  };
  Census Count();
  // Seats call these around each job (worker_pool.cc).
  void SeatBusy() { ++busy_; }
  void SeatIdle() { --busy_; }
  GpuLease* lease() { return lease_.get(); }
  // Who holds this device's GPU (gpu_census.h); null on a CPU, or where NVML cannot say why:
  // census_unavailable().
  const GpuCensus* census() const { return census_ ? &*census_ : nullptr; }
  const std::string& census_unavailable() const { return census_unavailable_; }

 private:
  // Forks from the zygote, or starts an interpreter where there is none.
  StatusOr<std::unique_ptr<WorkerProcess>> StartWorker();
  // A dead zygote is restarted, at most once per back-off period (1 s,
  // doubling to 60 s while starts keep failing).
  void RestartZygoteIfDue();
  StatusOr<std::unique_ptr<WorkerProcess>> Prepare(std::unique_ptr<WorkerProcess> worker,
                                                   Clock::time_point deadline);
  // Runs `job` as house-keeping of `kind` on this device's GPU.
  Status Housekeeping(HousekeepingKind kind, const std::function<Status()>& job);
  void SpawnLoop();
  // Takes started workers and prepares them (imports, CUDA context) until stopping.
  void PrepareLoop();

  const DeviceSpec spec_;
  const WorkerLaunch launch_;
  const bool use_zygote_;
  const std::chrono::seconds spawn_timeout_;
  WorkerSetup& setup_;
  EventSink& events_;
  GpuArbiter& arbiter_;
  std::unique_ptr<GpuLease> lease_;
  std::optional<GpuCensus> census_;
  std::string census_unavailable_;
  std::unique_ptr<Zygote> zygote_;  // spawner thread only (after Start), as are the two below
  std::chrono::seconds zygote_backoff_{1};
  Clock::time_point next_zygote_start_{};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<WorkerProcess>> ready_;  // guarded by mu_
  // Started, not yet prepared, with their deadlines; guarded by mu_.
  std::deque<std::pair<std::unique_ptr<WorkerProcess>, Clock::time_point>> started_;
  int preparing_ = 0;             // taken from started_ by a preparer; guarded by mu_
  std::atomic<int> retiring_{0};  // in Retire now
  std::atomic<int> busy_{0};
  bool stopping_ = false;  // guarded by mu_
  std::thread spawner_;
  std::vector<std::thread> preparers_;
};

}  // namespace kc::pool
