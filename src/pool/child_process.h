// ChildProcess: a spawned process that leads its own session, owned RAII-style.
//
// The destructor kills the whole process tree and reaps the child, so no path
// leaves an orphan (STYLE.md §6). Workers make themselves child subreapers,
// so descendants that call setsid() or lose their parent stay below the
// worker and are found by KillTree (spec/server.md §9: such children escape
// the reference's process-group kill).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace kc::pool {

struct SpawnOptions {
  std::vector<std::string> argv;
  std::vector<std::string> env;             // complete environment, NAME=VALUE
  std::vector<std::pair<int, int>> fd_map;  // {parent fd, child fd}
};

class ChildProcess {
 public:
  ChildProcess() = default;
  static StatusOr<ChildProcess> Spawn(const SpawnOptions& options);
  // Takes charge of a process that is not our child (a worker forked by the
  // zygote): it is killed the same way, and the zygote reaps it.
  static ChildProcess Adopt(pid_t pid) {
    ChildProcess adopted(pid);
    adopted.own_child_ = false;
    return adopted;
  }
  // The same for a sandboxed worker, through pid 1 of its PID namespace:
  // killing `init` kills the whole namespace (the kernel's guarantee, no
  // /proc walk), and it has exited only once everything in it is gone.
  static ChildProcess AdoptNamespace(pid_t init, pid_t worker) {
    ChildProcess adopted = Adopt(init);
    adopted.namespace_init_ = true;
    adopted.worker_pid_ = worker;
    return adopted;
  }

  ~ChildProcess() { KillTreeAndReap(); }
  ChildProcess(ChildProcess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)),
        pidfd_(std::move(other.pidfd_)),
        own_child_(other.own_child_),
        namespace_init_(other.namespace_init_),
        worker_pid_(other.worker_pid_),
        exit_status_(other.exit_status_),
        exit_description_(std::move(other.exit_description_)) {}
  ChildProcess& operator=(ChildProcess&& other) noexcept {
    if (this != &other) {
      KillTreeAndReap();
      pid_ = std::exchange(other.pid_, -1);
      pidfd_ = std::move(other.pidfd_);
      own_child_ = other.own_child_;
      namespace_init_ = other.namespace_init_;
      worker_pid_ = other.worker_pid_;
      exit_status_ = other.exit_status_;
      exit_description_ = std::move(other.exit_description_);
    }
    return *this;
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The process that runs the worker's code, for logs (of a namespace: its
  // worker, not pid 1).
  pid_t pid() const { return worker_pid_ > 0 ? worker_pid_ : pid_; }
  bool running() const { return pid_ > 0; }
  // Readable once the process has exited (pidfd_open), whoever its parent
  // is: a worker's death is seen when it happens, not when its socket
  // closes (a child of it may hold the socket open). -1 where unsupported.
  int pidfd() const { return pidfd_.get(); }
  // False once the process has exited (it may not be reaped yet).
  bool alive() const;

  // Freezes the child and every descendant (SIGSTOP, repeated until no new
  // process appears), then SIGKILLs them all (a namespace init: itself
  // only), and reaps the child or waits for its exit. Idempotent.
  void KillTreeAndReap();

  // How the child ended ("exit code 3", "signal 9"); empty while running.
  const std::string& exit_description() const { return exit_description_; }

 private:
  explicit ChildProcess(pid_t pid);
  void KillTree();  // SIGSTOPs, then SIGKILLs, the child and its descendants
  void Reaped(int status);

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  bool own_child_ = true;
  bool namespace_init_ = false;
  pid_t worker_pid_ = -1;  // of a namespace: its worker, pid 2 inside
  int exit_status_ = 0;
  std::string exit_description_;
};

// Every live descendant of `root` (not `root` itself), found through /proc.
std::vector<pid_t> Descendants(pid_t root);

}  // namespace kc::pool
