// The first process of a sandboxed worker's PID namespace. The worker itself
// runs as pid 2 below it, so user code keeps ordinary signal semantics (a
// namespace's pid 1 ignores every signal it has no handler for, even its own
// SIGKILL) while pid 1 reaps orphans and exits the moment the worker does;
// the kernel then kills everything left in the namespace. The server watches
// pid 1: its exit means the whole request's tree is gone.
#pragma once

#include <sys/types.h>

namespace kc::worker {

// Closes every descriptor, reaps children until `worker` exits, then exits
// with its status (128 + signal for a killed worker). Never returns.
[[noreturn]] void RunNamespaceInit(pid_t worker);

}  // namespace kc::worker
