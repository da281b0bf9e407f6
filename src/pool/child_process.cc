#include "pool/child_process.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "base/clock.h"

namespace kc::pool {

ChildProcess::ChildProcess(pid_t pid)
    : pid_(pid), pidfd_(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))) {}

bool ChildProcess::alive() const {
  if (pid_ <= 0) return false;
  if (!pidfd_.valid()) return ::kill(pid_, 0) == 0;
  pollfd p{pidfd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

StatusOr<ChildProcess> ChildProcess::Spawn(const SpawnOptions& options) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int highest_child_fd = 2;
  for (const auto& [parent_fd, child_fd] : options.fd_map) {
    posix_spawn_file_actions_adddup2(&actions, parent_fd, child_fd);
    highest_child_fd = std::max(highest_child_fd, child_fd);
  }
  // Nothing else of the server's leaks in (its log files, listening socket,
  // cache descriptors), whether or not they were opened close-on-exec.
  posix_spawn_file_actions_addclosefrom_np(&actions, highest_child_fd + 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own session: the process group can be signalled as one, and a terminal's
  // signals never reach workers. Default signal mask and dispositions.
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> argv;
  for (const auto& a : options.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : options.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return InternalError("cannot start " + options.argv[0] + ": " + std::strerror(rc));
  }
  return ChildProcess(pid);
}

namespace {

// ppid of every process, from /proc/<pid>/stat (the field after the ")" of comm).
std::multimap<pid_t, pid_t> ChildrenByParent() {
  std::multimap<pid_t, pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) != 2) continue;
    if (state == 'Z') continue;  // already dead
    children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return children;
}

// Waits for a process that is not our child to exit (become a zombie or vanish).
void AwaitExit(pid_t pid, std::chrono::milliseconds limit) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};  // readable once the process has exited
    ::poll(&p, 1, static_cast<int>(limit.count()));
    ::close(pidfd);
    return;
  }
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return;
    size_t close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') return;
    ::usleep(1000);
  }
}

}  // namespace

std::vector<pid_t> Descendants(pid_t root) {
  auto children = ChildrenByParent();
  std::vector<pid_t> found;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    pid_t parent = frontier.back();
    frontier.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      found.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return found;
}

void ChildProcess::Reaped(int status) {
  exit_status_ = status;
  if (WIFEXITED(status)) {
    exit_description_ = "exit code " + std::to_string(WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    exit_description_ = "signal " + std::to_string(WTERMSIG(status));
  }
  pid_ = -1;
  pidfd_.Reset();
}

void ChildProcess::KillTreeAndReap() {
  if (pid_ <= 0) return;
  if (namespace_init_) {
    ::kill(pid_, SIGKILL);
  } else {
    KillTree();
  }
  if (!own_child_) {
    // Its parent, the zygote, reaps it; we still wait until it has exited, so
    // that a GPU worker's context is gone before the caller releases the lease.
    AwaitExit(pid_, std::chrono::seconds(10));
    exit_description_ = "killed";
    pid_ = -1;
    pidfd_.Reset();
    return;
  }
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  Reaped(status);
}

void ChildProcess::KillTree() {
  // Freeze first so nothing can fork while we look; repeat until stable.
  std::set<pid_t> frozen = {pid_};
  ::kill(pid_, SIGSTOP);
  for (int round = 0; round < 50; ++round) {
    bool grew = false;
    for (pid_t p : Descendants(pid_)) {
      if (frozen.insert(p).second) {
        ::kill(p, SIGSTOP);
        grew = true;
      }
    }
    if (!grew) break;
  }
  for (pid_t p : frozen)
    ::kill(p, SIGKILL);
}

}  // namespace kc::pool
