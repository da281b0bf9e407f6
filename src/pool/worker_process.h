// WorkerProcess: one occupant of a seat, a Python worker driven by kcoral._core.
//
// Not thread-safe: one thread (the seat's) drives it at a time. Lifetime:
//   auto worker = WorkerProcess::Start(launch);   // spawns, returns at once
//   worker->AwaitReady(deadline);                 // imports done, ready frame read
//   RunResult r = worker->Run(request);           // one program
//   worker.reset();                               // kills the whole tree, reaps
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/shared_bytes.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "ipc/messages.h"
#include "ipc/sandbox_spec.h"
#include "ipc/worker_settings.h"
#include "pool/cancel_flag.h"
#include "pool/child_process.h"
#include "pool/gpu_census.h"
#include "pool/gpu_lease.h"
#include "pool/worker_run.h"
#include "pool/worker_setup.h"

namespace kc::pool {

// What the pool's caller tells every worker's own code (ipc/worker_settings.h).
using WorkerSettings = ipc::WorkerSettings;
using WorkerDevice = ipc::WorkerDevice;
using WorkerCpuExecution = ipc::CpuExecution;

struct WorkerLaunch {
  std::vector<std::string> argv;  // e.g. {python, "-m", "kcoral._worker"}
  // What user code, its children and the CUDA driver see; KCORAL_WORKER_FD is added.
  std::vector<std::string> env;
  WorkerSettings settings;  // sent in the start message, not in `env`
};

// Spawns `launch` with one end of a new socketpair as its fd 3 (announced in
// KCORAL_WORKER_FD, the one variable read before any message) and sends the start message:
// launch.settings and, for a worker started without a zygote, its spec (nullopt for the zygote).
// Returns the child and the server's end.
StatusOr<std::pair<ChildProcess, UniqueFd>> SpawnWithSocket(const WorkerLaunch& launch,
                                                            std::optional<ipc::WorkerSpec> worker);

class WorkerProcess {
 public:
  // A worker started without a zygote, confining itself as `spec` says.
  static StatusOr<std::unique_ptr<WorkerProcess>> Start(const WorkerLaunch& launch,
                                                        ipc::WorkerSpec spec);
  // A worker started by someone else (the zygote), reached through `socket`.
  static std::unique_ptr<WorkerProcess> Adopt(ChildProcess child, UniqueFd socket) {
    return std::unique_ptr<WorkerProcess>(new WorkerProcess(std::move(child), std::move(socket)));
  }

  // Kills the tree while the worker still blocks on its socket. Closing the
  // socket first would let the worker exit on its own, and its background
  // children would then be orphaned to init, out of KillTree's reach.
  ~WorkerProcess() { child_.KillTreeAndReap(); }

  // Waits for the ready frame. Errors name what the worker did instead.
  Status AwaitReady(Clock::time_point deadline);

  RunResult Run(const RunRequest& request);

  // GPU workers only, in this order; both are house-keeping (gpu_arbiter.h), scheduled by the
  // caller. Initialize creates the CUDA context, its first allocation and the libraries' state
  // (no kernels); WarmUp runs the first kernels (CUPTI, the L2 flush buffer, common kernels).
  Status Initialize(Clock::time_point deadline);
  Status WarmUp(Clock::time_point deadline);

  // Gives the worker its workspace and cgroup; they are removed after its tree.
  void Attach(WorkerResources resources) { resources_ = std::move(resources); }
  Workspace& workspace() { return resources_.workspace; }
  // False once the process has exited (a stand-by killed before use).
  bool alive() const { return child_.alive(); }

  pid_t pid() const { return child_.pid(); }
  const nlohmann::json& describe() const { return describe_; }
  // 32 bytes from the ready frame (docs/benchmark-integrity.md); empty before AwaitReady.
  const std::string& seal_key() const { return seal_key_; }
  int socket_fd() const { return socket_.get(); }
  int requests_served() const { return requests_served_; }

 private:
  WorkerProcess(ChildProcess child, UniqueFd socket)
      : child_(std::move(child)), socket_(std::move(socket)) {}
  Status SetUpDevice(ipc::MessageType step, ipc::MessageType done, Clock::time_point deadline);

  ChildProcess child_;
  UniqueFd socket_;
  nlohmann::json describe_;
  std::string seal_key_;
  int requests_served_ = 0;
  WorkerResources resources_;  // last: removed once the tree is dead
};

}  // namespace kc::pool
