// Zygote: a prepared Python process that forks fresh workers (see
// python/kcoral/_worker/zygote.py). A fork costs milliseconds where a new
// interpreter with its imports costs a large part of a CPU second, so one
// request per process stays cheap. Used by one thread (the pool's spawner).
#pragma once

#include <memory>
#include <utility>

#include "base/status.h"
#include "base/unique_fd.h"
#include "ipc/sandbox_spec.h"
#include "pool/child_process.h"
#include "pool/worker_process.h"

namespace kc::pool {

class Zygote {
 public:
  static StatusOr<std::unique_ptr<Zygote>> Start(const WorkerLaunch& launch,
                                                 Clock::time_point deadline);

  // Kills the zygote and its workers before closing the socket (see ~WorkerProcess).
  ~Zygote() { child_.KillTreeAndReap(); }

  // Forks a worker that confines itself as `spec` says (ipc/sandbox_spec.h);
  // returns it not yet ready (call AwaitReady).
  StatusOr<std::unique_ptr<WorkerProcess>> Fork(const ipc::WorkerSpec& spec);
  bool alive() const { return child_.alive(); }

 private:
  Zygote(ChildProcess child, UniqueFd socket)
      : child_(std::move(child)), socket_(std::move(socket)) {}

  ChildProcess child_;
  UniqueFd socket_;
};

}  // namespace kc::pool
