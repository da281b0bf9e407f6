// EnterSandbox: confines the calling worker (docs/sandbox.md). Called
// once, right after the zygote's fork, before the worker reports ready, in
// this order (each step needs the privileges the next one drops):
//   1. join the worker's cgroups (memory, process count);
//   2. (unless the network is "host") the network namespace the zygote
//      lent it (network_namespaces.h); new IPC and UTS namespaces; the PID
//      namespace already exists (pid_namespace.h);
//   3. a copy of the view's template mount namespace, completed for this
//      worker (mount_view.h); hostname "kcoral";
//   4. drop to the sandbox user: no capabilities, no_new_privs;
//   5. close every descriptor but the server socket;
//   6. the seccomp filter.
// Any failure is returned with the part that failed; the worker then reports
// it and exits, and a server whose first worker cannot enter refuses to start.
#pragma once

#include <string>

#include "base/status.h"
#include "ipc/sandbox_spec.h"

namespace kc::worker {

// Returns the workspace's path inside the sandbox.
StatusOr<std::string> EnterSandbox(const ipc::SandboxSpec& spec, int socket_fd);

}  // namespace kc::worker
