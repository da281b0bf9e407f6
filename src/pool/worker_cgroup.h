// Cgroups that limit each worker and everything it starts: host memory and
// the number of tasks (processes and threads). The server makes one subtree,
// kcoral-<pid>, and one group per worker below it; the worker joins its group
// itself, as root, before it drops privileges (worker/sandbox.h).
//
// cgroup v2 where /sys/fs/cgroup is the unified hierarchy (the GPU machine),
// else the v1 `memory` and `pids` controllers (the CI and development
// machines). CgroupTree is thread-safe; a WorkerCgroup belongs to its worker.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
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
      : dirs_(std::exchange(other.dirs_, {})), v2_(other.v2_) {}
  WorkerCgroup& operator=(WorkerCgroup&& other) noexcept;
  // Kills whatever is left in the group and removes it.
  ~WorkerCgroup() { Remove(); }

  // The cgroup.procs files the worker writes itself into.
  std::vector<std::string> procs_files() const;
  // True once the kernel's OOM killer has killed a task of this group.
  bool oom_killed() const;

 private:
  friend class CgroupTree;
  WorkerCgroup(std::vector<std::string> dirs, bool v2) : dirs_(std::move(dirs)), v2_(v2) {}
  void Remove();

  std::vector<std::string> dirs_;  // one per hierarchy (v1: memory, pids)
  bool v2_ = false;
};

class CgroupTree {
 public:
  // Creates the server's subtree; errors say which controller or directory
  // is missing and how to get it.
  static StatusOr<std::unique_ptr<CgroupTree>> Create();
  ~CgroupTree();

  StatusOr<WorkerCgroup> NewWorkerGroup(const CgroupLimits& limits);
  std::string version() const { return v2_ ? "v2" : "v1"; }

 private:
  CgroupTree(std::vector<std::string> roots, bool v2) : roots_(std::move(roots)), v2_(v2) {}

  const std::vector<std::string> roots_;  // kcoral-<pid> in each hierarchy
  const bool v2_;
  std::atomic<int> next_{0};
};

}  // namespace kc::pool
