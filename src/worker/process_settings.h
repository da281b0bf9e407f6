// ProcessSettings: this worker process's settings (ipc/worker_settings.h), set once.
//
// A worker interpreter sets them from the start message the server sends first
// (kcoral._core.receive_start), before it imports what reads them (kcoral.builtins picks its
// timer by the device at import); a worker forked by the zygote has its zygote's. A process no
// server started (bench/seal_cost.py) may set them once with kcoral._core.use_worker_settings.
// Any later set is refused, so user code cannot change what its worker was told; until the
// first, the defaults of WorkerSettings{} hold (a CPU worker that runs uploads on the host).
//
// Not thread-safe: used with the GIL held (worker/module.cc).
#pragma once

#include "base/status.h"
#include "ipc/worker_settings.h"

namespace kc::worker {

class ProcessSettings {
 public:
  // kFailedPrecondition once settings were set.
  Status Set(ipc::WorkerSettings settings);

  const ipc::WorkerSettings& get() const { return settings_; }
  bool is_set() const { return is_set_; }

 private:
  ipc::WorkerSettings settings_;
  bool is_set_ = false;
};

}  // namespace kc::worker
