// The file system a sandboxed worker sees (docs/sandbox.md): a tmpfs root
// holding read-only binds of what workers need (the interpreter and its
// packages, /usr, an /etc subset, toolkits), the worker's workspace at /work,
// a private /tmp (tmpfs), a minimal /dev and a /proc of its own PID namespace.
// Nothing else of the host (the server's caches, logs, other workspaces,
// /root, /home) exists in it.
#pragma once

#include <string>

#include "base/status.h"
#include "worker/sandbox_spec.h"

namespace kc::worker {

// Builds the view on spec.new_root and pivots into it. Returns where the
// workspace is inside (/work, or /kcoral/work when a read-only path lives
// under /work), which becomes the cwd. Must run as root, in a new mount
// namespace, as pid 1 of a new PID namespace. Errors name the step that
// failed ("mount view: bind /usr: ...").
StatusOr<std::string> BuildMountView(const SandboxSpec& spec);

}  // namespace kc::worker
