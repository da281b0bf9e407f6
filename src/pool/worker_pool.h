// WorkerPool: seats, the admission queue and the devices whose prepared
// processes fill the seats (DESIGN.md "Seats and occupants").
//
// Each seat is a thread bound to one device. It takes the next job in FIFO
// order, runs it on its occupant and hands the result to the job's callback.
// With the default of one request per process the occupant is retired after
// answering (off the request's path), and the seat takes a prepared process
// for its next job, so no request waits for Python to start. Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "pool/admission_queue.h"
#include "pool/device_workers.h"
#include "pool/event_sink.h"
#include "pool/gpu_arbiter.h"
#include "pool/reserved_gpu_job.h"
#include "pool/worker_process.h"

namespace kc::pool {

// What the server does with a worker's workspace around a run (its build
// cache, store/build_cache.h); called on the seat thread, before the run and
// after the answer went out.
class WorkspaceHooks {
 public:
  virtual ~WorkspaceHooks() = default;
  virtual void BeforeRun(const RunRequest& run, Workspace& workspace) = 0;
  // `answered`: the worker sent its outcome (not a crash, timeout or cancellation).
  virtual void AfterRun(const RunRequest& run, bool answered, Workspace& workspace) = 0;
};

struct PoolOptions {
  std::vector<DeviceSpec> devices;
  int max_requests_per_worker = 1;  // 0: unlimited reuse
  size_t max_queued_requests = 1024;
  std::chrono::milliseconds worker_wait_timeout{1800 * 1000};
  std::chrono::seconds spawn_timeout{60};
  WorkerLaunch launch;
  bool use_zygote = true;  // fork workers from a prepared process (zygote.h)
  HousekeepingPolicy housekeeping = HousekeepingPolicy::kOutsideSpans;  // gpu_arbiter.h
  SandboxOptions sandbox;                                               // worker_setup.h
  WorkspaceHooks* hooks = nullptr;  // optional; outlives the pool
};

struct JobResult {
  bool ran = false;  // false: no seat within the wait timeout, or shutting down
  RunResult run;
  double queue_ms = 0;
  double elapsed_ms = 0;
  std::string worker_id;
  pid_t pid = -1;
  bool cancelled = false;  // the client went away, before or while it ran
  bool revoked = false;    // its key was revoked while it waited (never ran)
  // For a gpu_access violation: who held the GPU lease when it happened.
  std::optional<std::string> interfered_request_id;
  std::vector<int> gpu_ids;  // a reserved job's GPUs (options.gpu_count); else empty
};

struct Job {
  RunRequest run;      // `workspace` and `lease` are filled in by the pool; `cancel` by the caller
  int gpu_count = 0;   // > 0: whole GPUs on a transient worker (reserved_gpu_job.h)
  TenantShare share;   // for the fair share of seats (fair_share.h); the lease's is run.share
  std::string key_id;  // which of the tenant's keys, for revocation (never the key)
  std::function<void(JobResult)> done;  // called exactly once, from a pool thread
  Clock::time_point enqueued;
  Clock::time_point wait_deadline;
};

// One device's seats and processes (device_workers.h), for the dashboard.
struct DeviceLoad {
  std::string name;  // "cpu", "gpu0"
  int seats = 0;
  DeviceWorkers::Census workers;
};

struct PoolLoad {
  int request_capacity = 0;
  int requests_in_progress = 0;
  int requests_waiting = 0;
  std::vector<GpuArbiter::Activity> gpus;  // empty on a CPU pool
  std::vector<DeviceLoad> devices;
};

class WorkerPool {
 public:
  WorkerPool(PoolOptions options, EventSink& events);
  ~WorkerPool();

  // Sets up the workspaces (and the sandbox's cgroups) and starts every
  // device; the first worker of the first device describes the pool (target,
  // versions). Fails, naming the part, where the sandbox cannot be had.
  Status Start();

  // False when the queue is full or the pool is shutting down (503 busy).
  bool Submit(std::shared_ptr<Job> job);
  // How many whole GPUs a job may reserve (gpu_count); 0 on a CPU pool.
  int reservable_gpus() const { return reserved_ ? reserved_->gpu_count() : 0; }

  PoolLoad Load() const;
  std::map<std::string, int> WaitingByTenant() const { return queue_.WaitingByTenant(); }
  // Answers every waiting job `revoked` picks as revoked; returns how many.
  size_t Revoke(const std::function<bool(const Job&)>& revoked);
  const nlohmann::json& describe() const { return describe_; }
  // The sandbox's mode and parts (worker_setup.h); valid after Start.
  nlohmann::json DescribeSandbox() const { return setup_ ? setup_->Describe() : nullptr; }

  // Refuses new jobs, expires queued ones; running jobs finish.
  void BeginShutdown();
  // Waits for running jobs, then kills every process. Idempotent.
  void Join();

 private:
  void SeatLoop(DeviceWorkers& device, std::string seat);
  void RunJob(DeviceWorkers& device, const std::string& seat,
              std::unique_ptr<WorkerProcess>& occupant, Job& job);
  void RunReservedJob(const std::string& seat, Job& job, Clock::time_point started);
  static JobResult Busy(const Job& job);

  const PoolOptions options_;
  EventSink& events_;
  std::unique_ptr<WorkerSetup> setup_;
  std::unique_ptr<GpuArbiter> arbiter_;        // every GPU of the pool
  std::unique_ptr<ReservedGpuJobs> reserved_;  // GPU pools only
  nlohmann::json describe_ = {{"target", nlohmann::json::object()},
                              {"versions", nlohmann::json::object()}};
  using JobQueue = AdmissionQueue<Job>;
  JobQueue queue_;
  int seat_count_ = 0;
  std::atomic<int> running_{0};
  std::atomic<bool> shutting_down_{false};
  std::vector<std::unique_ptr<DeviceWorkers>> devices_;
  std::vector<std::thread> seats_;
};

}  // namespace kc::pool
