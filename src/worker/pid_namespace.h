// A fresh PID namespace for each worker the zygote forks: the zygote asks
// that its next children start a new namespace, starts that namespace's
// pid 1 (namespace_init.h) and forks the worker into it as pid 2, then
// restores its own namespace for the children after. When a namespace's
// pid 1 exits, the kernel kills every process left in it, so no process of a
// request can outlive its worker.
#pragma once

#include "base/status.h"

namespace kc::worker {

Status UnsharePidNamespaceForNextChild();
Status RestorePidNamespace();

}  // namespace kc::worker
