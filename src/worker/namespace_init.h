// The first process of a sandboxed worker's PID namespace. The worker itself
// runs as pid 2 beside it, so user code keeps ordinary signal semantics (a
// namespace's pid 1 ignores every signal it has no handler for, even its own
// SIGKILL), while pid 1 reaps the orphans that reach it. When pid 1 exits,
// the kernel kills everything left in the namespace, and its exit completes
// only once they are all gone: the server watches pid 1.
//
// pid 1 is a clone that shares the zygote's memory (CLONE_VM, as vfork does)
// and runs a few raw system calls on a stack of its own: no page tables are
// copied for it and none torn down at its end, which a fork of the zygote
// would cost (about 4 ms of CPU per worker on the CI machine). It never
// touches the shared memory: all its signals stay blocked, it waits for
// SIGCHLD synchronously, and it calls no libc function (errno is the
// zygote's thread-local). The zygote forks the worker right after it, into
// the same namespace, and kills pid 1 when it has reaped the worker.
//
//   UnsharePidNamespaceForNextChild();        // pid_namespace.h
//   pid_t init = StartNamespaceInit();       // pid 1
//   pid = os.fork()                          // the worker, pid 2
//   RestorePidNamespace();
//   ... the worker is reaped: kill(init, SIGKILL); init is reaped:
//   ForgetNamespaceInit(init);               // its stack is freed
#pragma once

#include <sys/types.h>

#include "base/status.h"

namespace kc::worker {

StatusOr<pid_t> StartNamespaceInit();

// Frees the stack of an init that has been reaped; other pids are ignored.
void ForgetNamespaceInit(pid_t init);

}  // namespace kc::worker
