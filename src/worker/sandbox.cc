#include "worker/sandbox.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "worker/mount_view.h"
#include "worker/privileges.h"
#include "worker/seccomp_filter.h"

namespace kc::worker {

StatusOr<std::string> EnterSandbox(const SandboxSpec& spec, int socket_fd) {
  KC_RETURN_IF_ERROR(JoinCgroups(spec.cgroup_procs));
  if (::getpid() != 1) {
    return FailedPreconditionError("pid namespace: the worker is not pid 1 of its own namespace");
  }
  const int flags =
      CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | (spec.private_network ? CLONE_NEWNET : 0);
  if (::unshare(flags) != 0) {
    return FailedPreconditionError(std::string("namespaces: unshare mount/ipc/uts/network: ") +
                                   std::strerror(errno));
  }
  KC_ASSIGN_OR_RETURN(std::string workspace, BuildMountView(spec));
  if (spec.private_network) KC_RETURN_IF_ERROR(BringUpLoopback());
  if (::sethostname("kcoral", 6) != 0)
    return FailedPreconditionError(std::string("uts namespace: ") + std::strerror(errno));
  KC_RETURN_IF_ERROR(DropPrivileges(spec.uid, spec.gid));
  KC_RETURN_IF_ERROR(CloseInheritedFds(socket_fd));
  KC_RETURN_IF_ERROR(InstallSeccompFilter());
  return workspace;
}

}  // namespace kc::worker
