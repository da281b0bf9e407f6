#include "worker/privileges.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/memfd.h"
#include "base/unique_fd.h"

namespace kc::worker {

namespace {

Status Failed(const std::string& step) {
  return FailedPreconditionError(step + ": " + std::strerror(errno));
}

// Plain reads, no iostreams: this runs inside interpreters that may load
// another libstdc++ than ours, whose locale facets then crash (seen on the
// GPU machine).
int LastCapability() {
  UniqueFd file(::open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC));
  auto text = file.valid() ? ReadWholeFd(file.get()) : StatusOr<std::string>(InternalError(""));
  const int last = text.ok() ? std::atoi(text->c_str()) : 0;
  return last > 0 ? last : CAP_LAST_CAP;
}

}  // namespace

Status JoinCgroups(const std::vector<std::string>& procs_files) {
  for (const std::string& path : procs_files) {
    UniqueFd procs(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs.valid() || ::write(procs.get(), "0", 1) != 1) return Failed("cgroup: join " + path);
  }
  return Status::Ok();
}

Status DropPrivileges(uid_t uid, gid_t gid) {
  const int last = LastCapability();
  for (int cap = 0; cap <= last; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      return Failed("privileges: drop capability " + std::to_string(cap));
  }
  if (::setgroups(0, nullptr) != 0) return Failed("privileges: setgroups");
  if (::setresgid(gid, gid, gid) != 0) return Failed("privileges: setresgid");
  if (::setresuid(uid, uid, uid) != 0) return Failed("privileges: setresuid");
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return Failed("privileges: clear ambient capabilities");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return Failed("privileges: no_new_privs");
  // A uid change makes the process undumpable, which hands its /proc files
  // to root; the worker must still read its own (torch does). ptrace stays
  // denied by the seccomp filter.
  if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return Failed("privileges: dumpable");
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return Failed("privileges: capget");
  if (data[0].effective | data[0].permitted | data[1].effective | data[1].permitted) {
    return FailedPreconditionError("privileges: capabilities remain after the uid change");
  }
  return Status::Ok();
}

Status CloseInheritedFds(int keep_fd) {
  UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null.valid()) return Failed("descriptors: open /dev/null");
  for (int fd = 0; fd < 3; ++fd) {
    if (::dup2(null.get(), fd) < 0) return Failed("descriptors: dup2");
  }
  null.Reset();
  if (keep_fd < 3) return InvalidArgumentError("descriptors: the kept one must be above 2");
  if ((keep_fd > 3 && ::syscall(SYS_close_range, 3u, keep_fd - 1u, 0u) != 0) ||
      ::syscall(SYS_close_range, keep_fd + 1u, ~0u, 0u) != 0) {
    return Failed("descriptors: close_range");
  }
  return Status::Ok();
}

}  // namespace kc::worker
