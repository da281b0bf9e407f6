// The file system a sandboxed worker sees (docs/sandbox.md): a tmpfs root
// holding read-only binds of what workers need (the interpreter and its
// packages, /usr, an /etc subset, toolkits), the worker's workspace at /work,
// a private /tmp (tmpfs), a minimal /dev and a /proc of its own PID namespace.
// Nothing else of the host (the server's caches, logs, other workspaces,
// /root, /home) exists in it.
//
// Built in two steps, because the ~25 binds and remounts of the shared part
// cost a worker more than everything else it does to start:
//   1. once per view (view_templates.h), in a helper's own mount namespace:
//      BuildViewTemplate mounts everything workers share and pivots into it;
//   2. per worker, EnterView joins that namespace, copies it (unshare), adds
//      the worker's own /tmp, /dev/shm, workspace and /proc, and detaches
//      what only the setup may see.
#pragma once

#include <string>

#include "base/status.h"
#include "ipc/sandbox_spec.h"

namespace kc::worker {

// Must run as root in a mount namespace of its own. Errors name the step that
// failed ("mount view: bind /usr: ...").
Status BuildViewTemplate(const ipc::SandboxSpec& spec);

// Enters the template spec.view_fd names. Returns where the workspace is
// inside (/work, or /kcoral/work when a read-only path lives under /work),
// which becomes the cwd. Must run as root, single-threaded, in the worker's
// own PID namespace.
StatusOr<std::string> EnterView(const ipc::SandboxSpec& spec);

}  // namespace kc::worker
