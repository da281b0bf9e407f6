#include "worker/sandbox.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "worker/mount_view.h"
#include "worker/privileges.h"
#include "worker/seccomp_filter.h"

namespace kc::worker {

StatusOr<std::string> EnterSandbox(const ipc::SandboxSpec& spec, int socket_fd) {
  KC_RETURN_IF_ERROR(JoinCgroups(spec.cgroup_procs));
  if (::getpid() != 2) {
    return FailedPreconditionError("pid namespace: the worker is not pid 2 of its own namespace");
  }
  if (spec.view_fd < 0 || (spec.private_network && spec.network_fd < 0))
    return InvalidArgumentError("sandbox spec: no view_fd, or no network_fd for network none");
  if (spec.private_network && ::setns(spec.network_fd, CLONE_NEWNET) != 0) {
    return FailedPreconditionError(std::string("network namespace: enter: ") +
                                   std::strerror(errno));
  }
  if (::unshare(CLONE_NEWIPC | CLONE_NEWUTS) != 0) {
    return FailedPreconditionError(std::string("namespaces: unshare ipc/uts: ") +
                                   std::strerror(errno));
  }
  KC_ASSIGN_OR_RETURN(std::string workspace, EnterView(spec));
  if (::sethostname("kcoral", 6) != 0)
    return FailedPreconditionError(std::string("uts namespace: ") + std::strerror(errno));
  KC_RETURN_IF_ERROR(DropPrivileges(spec.uid, spec.gid));
  KC_RETURN_IF_ERROR(CloseInheritedFds(socket_fd));
  KC_RETURN_IF_ERROR(InstallSeccompFilter());
  return workspace;
}

}  // namespace kc::worker
