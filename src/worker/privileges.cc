#include "worker/privileges.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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
  for (int cap = 0; cap <= LastCapability(); ++cap) {
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
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return Failed("descriptors: list /proc/self/fd");
  std::vector<int> open_fds;
  while (dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (*end == '\0' && entry->d_name[0] != '\0') open_fds.push_back(static_cast<int>(fd));
  }
  const int listing = ::dirfd(dir);
  for (int fd : open_fds) {
    if (fd > 2 && fd != keep_fd && fd != listing && fd != null.get()) ::close(fd);
  }
  ::closedir(dir);
  return Status::Ok();
}

Status BringUpLoopback() {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return Failed("network: socket");
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &request) != 0) return Failed("network: read lo flags");
  request.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &request) != 0) return Failed("network: bring lo up");
  return Status::Ok();
}

}  // namespace kc::worker
