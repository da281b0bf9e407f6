// Cgroups that limit each worker and everything it starts: host memory and
// the number of tasks (processes and threads). The server makes one subtree,
// kcoral-<pid>, and one group per worker below it; the worker joins its group
// itself, as root, before it drops privileges (worker/sandbox.h).
//
// cgroup v2 where /sys/fs/cgroup is the unified hierarchy (the GPU machine),
// else the v1 `memory` and `pids` controllers (the CI and development
// machines). CgroupTree is thread-safe; a WorkerCgroup belongs to its worker.
//
// A group is lent to one worker at a time and reused: creating and removing
// the two v1 groups cost about 1.5 ms of CPU per worker on the CI machine.
// It goes back to the tree empty (every task of it gone, killed if need be),
// with its peak and failure counters reset and the OOM kills so far noted,
// and only while what stays charged to it after its worker (page cache the
// worker read in first) is under 64 MiB; otherwise it is removed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace kc::pool {

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // 0: no limit
  int max_tasks = 512;
};

class WorkerCgroup {
 public:
  WorkerCgroup() = default;
  WorkerCgroup(WorkerCgroup&& other) noexcept
      : tree_(std::exchange(other.tree_, nullptr)),
        dirs_(std::exchange(other.dirs_, {})),
        v2_(other.v2_),
        oom_kills_before_(other.oom_kills_before_) {}
  WorkerCgroup& operator=(WorkerCgroup&& other) noexcept;
  // Kills whatever is left in the group and gives it back to its tree.
  ~WorkerCgroup() { Release(); }

  // The cgroup.procs files the worker writes itself into.
  std::vector<std::string> procs_files() const;
  // True once the kernel's OOM killer has killed a task of this group
  // since this worker got it.
  bool oom_killed() const;

 private:
  friend class CgroupTree;
  WorkerCgroup(class CgroupTree* tree, std::vector<std::string> dirs, bool v2);
  void Release();

  class CgroupTree* tree_ = nullptr;
  std::vector<std::string> dirs_;  // one per hierarchy (v1: memory, pids)
  bool v2_ = false;
  long long oom_kills_before_ = 0;
};

class CgroupTree {
 public:
  // Creates the server's subtree; errors say which controller or directory
  // is missing and how to get it.
  static StatusOr<std::unique_ptr<CgroupTree>> Create();
  ~CgroupTree();

  // Every group of a tree has the same limits: the first call's.
  StatusOr<WorkerCgroup> NewWorkerGroup(const CgroupLimits& limits);
  std::string version() const { return v2_ ? "v2" : "v1"; }

 private:
  friend class WorkerCgroup;
  CgroupTree(std::vector<std::string> roots, bool v2) : roots_(std::move(roots)), v2_(v2) {}
  // Empties the group; keeps it for the next worker, or removes it.
  void TakeBack(std::vector<std::string> dirs);

  const std::vector<std::string> roots_;  // kcoral-<pid> in each hierarchy
  const bool v2_;
  std::atomic<int> next_{0};
  std::mutex mu_;
  std::vector<std::vector<std::string>> idle_;  // guarded by mu_
};

}  // namespace kc::pool
