#include "worker/pid_namespace.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/unique_fd.h"

namespace kc::worker {

namespace {

// The zygote's own PID namespace, opened before the first unshare.
int OwnNamespace() {
  static const int fd = ::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
  return fd;
}

}  // namespace

Status UnsharePidNamespaceForNextChild() {
  if (OwnNamespace() < 0)
    return FailedPreconditionError(std::string("pid namespace: ") + std::strerror(errno));
  if (::unshare(CLONE_NEWPID) != 0)
    return FailedPreconditionError(std::string("pid namespace: unshare: ") + std::strerror(errno));
  return Status::Ok();
}

Status RestorePidNamespace() {
  if (::setns(OwnNamespace(), CLONE_NEWPID) != 0)
    return InternalError(std::string("pid namespace: restore: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace kc::worker
