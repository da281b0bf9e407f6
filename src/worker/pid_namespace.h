// A fresh PID namespace for each worker the zygote forks, without a second
// fork: the zygote asks that its next child start a new namespace (it becomes
// that namespace's pid 1), forks, and then restores its own namespace for the
// children after. When a namespace's pid 1 exits, the kernel kills every
// process left in it, so no process of a request can outlive its worker.
//
//   UnsharePidNamespaceForNextChild();
//   pid = os.fork()        # the child is pid 1 of a new namespace
//   RestorePidNamespace(); # in the zygote
#pragma once

#include "base/status.h"

namespace kc::worker {

Status UnsharePidNamespaceForNextChild();
Status RestorePidNamespace();

}  // namespace kc::worker
