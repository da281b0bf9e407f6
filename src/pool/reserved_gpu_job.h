// ReservedGpuJob: a program with options.gpu_count (spec/server.md §2.12)
// runs on a fresh, transient worker that holds whole GPUs for its whole life.
// The GPUs are reserved all-or-nothing through the arbiter before the worker
// starts, so its CUDA contexts are created, used and destroyed while nobody
// else is on those GPUs, and given back only once its process tree is dead.
// Single-GPU requests on those GPUs wait meanwhile and never share them. The
// seat that took the job from the queue is only its admission token.
//
// The worker is a new interpreter, not a fork of a device's zygote (which
// serves its own spawner thread and sees one GPU): on the GPU machine that
// costs the `import torch` of a cold start, a few seconds per job.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pool/device_workers.h"
#include "pool/event_sink.h"
#include "pool/gpu_arbiter.h"
#include "pool/worker_process.h"
#include "pool/worker_setup.h"

namespace kc::pool {

struct ReservedRun {
  RunResult run;             // lease_wait_ms: waiting for the GPUs; lease_held_ms: holding them
  std::vector<int> gpu_ids;  // the GPUs it held (server indices, as in --gpus)
  pid_t pid = -1;
};

class ReservedGpuJobs {
 public:
  // `gpus`: the specs of every GPU device of the pool (uuid, env, device nodes).
  ReservedGpuJobs(std::vector<DeviceSpec> gpus, WorkerLaunch launch,
                  std::chrono::seconds spawn_timeout, WorkerSetup& setup, GpuArbiter& arbiter,
                  EventSink& events)
      : gpus_(std::move(gpus)),
        launch_(std::move(launch)),
        spawn_timeout_(spawn_timeout),
        setup_(setup),
        arbiter_(arbiter),
        events_(events) {}

  int gpu_count() const { return static_cast<int>(gpus_.size()); }

  // Reserves `gpu_count` GPUs, runs `request` on a new worker that sees only
  // them and returns once the worker's tree is gone and the GPUs are free.
  ReservedRun Run(RunRequest request, int gpu_count);

 private:
  // The launch of a worker that sees exactly `chosen`.
  WorkerLaunch LaunchFor(const std::vector<const DeviceSpec*>& chosen) const;
  StatusOr<std::unique_ptr<WorkerProcess>> StartWorker(
      const std::vector<const DeviceSpec*>& chosen);
  std::vector<const DeviceSpec*> SpecsOf(const std::vector<int>& ids) const;
  // Starts the job's worker on `chosen` (held) and runs `request` there; reserved.run gets the
  // worker's result, the lease figures come after.
  void RunOnWorker(RunRequest& request, const std::vector<const DeviceSpec*>& chosen,
                   ReservedRun& reserved);

  const std::vector<DeviceSpec> gpus_;
  const WorkerLaunch launch_;
  const std::chrono::seconds spawn_timeout_;
  WorkerSetup& setup_;
  GpuArbiter& arbiter_;
  EventSink& events_;
};

}  // namespace kc::pool
