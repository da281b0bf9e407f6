#include "pool/worker_cgroup.h"

#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace kc::pool {

namespace {

constexpr const char* kRoot = "/sys/fs/cgroup";

Status WriteValue(const std::string& path, const std::string& value) {
  std::ofstream file(path);
  file << value;
  file.flush();
  if (!file) {
    return FailedPreconditionError("cgroup: cannot write '" + value + "' to " + path + ": " +
                                   std::strerror(errno));
  }
  return Status::Ok();
}

std::string ReadValue(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return FailedPreconditionError("cgroup: cannot create " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

bool HasWord(const std::string& text, const std::string& word) {
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (w == word) return true;
  }
  return false;
}

// Kills every task left in `dir` (v2: at once, with cgroup.kill, kernel
// 5.14+; else one by one) and waits until it has none; false when it cannot
// be emptied (a task that will not die).
bool EmptyGroupDir(const std::string& dir, bool v2) {
  if (v2) (void)WriteValue(dir + "/cgroup.kill", "1");
  for (int attempt = 0; attempt < 200; ++attempt) {
    std::istringstream pids(ReadValue(dir + "/cgroup.procs"));
    bool any = false;
    for (pid_t pid; pids >> pid; any = true)
      ::kill(pid, SIGKILL);
    if (!any) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// rmdir succeeds once the last task has been reaped; killed tasks take a moment.
void RemoveGroupDir(const std::string& dir, bool v2) {
  EmptyGroupDir(dir, v2);
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (::rmdir(dir.c_str()) == 0 || errno != EBUSY) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

long long CounterIn(const std::string& file, const std::string& key) {
  std::istringstream words(ReadValue(file));
  for (std::string word; words >> word;) {
    long long count = 0;
    if (word == key && words >> count) return count;
  }
  return 0;
}

std::string OomEventsFile(const std::string& memory_dir, bool v2) {
  return memory_dir + (v2 ? "/memory.events" : "/memory.oom_control");
}

constexpr unsigned long long kMaxChargeToReuse = 64ull << 20;

}  // namespace

WorkerCgroup::WorkerCgroup(CgroupTree* tree, std::vector<std::string> dirs, bool v2)
    : tree_(tree), dirs_(std::move(dirs)), v2_(v2) {
  if (!dirs_.empty()) oom_kills_before_ = CounterIn(OomEventsFile(dirs_[0], v2_), "oom_kill");
}

WorkerCgroup& WorkerCgroup::operator=(WorkerCgroup&& other) noexcept {
  if (this != &other) {
    Release();
    tree_ = std::exchange(other.tree_, nullptr);
    dirs_ = std::exchange(other.dirs_, {});
    v2_ = other.v2_;
    oom_kills_before_ = other.oom_kills_before_;
  }
  return *this;
}

std::vector<std::string> WorkerCgroup::procs_files() const {
  std::vector<std::string> files;
  for (const std::string& dir : dirs_)
    files.push_back(dir + "/cgroup.procs");
  return files;
}

bool WorkerCgroup::oom_killed() const {
  if (dirs_.empty()) return false;
  return CounterIn(OomEventsFile(dirs_[0], v2_), "oom_kill") > oom_kills_before_;
}

void WorkerCgroup::Release() {
  if (!dirs_.empty() && tree_ != nullptr) tree_->TakeBack(std::exchange(dirs_, {}));
  for (const std::string& dir : dirs_) {  // a group that belongs to no tree
    RemoveGroupDir(dir, v2_);
  }
  dirs_.clear();
}

void CgroupTree::TakeBack(std::vector<std::string> dirs) {
  bool reusable = true;
  for (const std::string& dir : dirs) {
    reusable = EmptyGroupDir(dir, v2_) && reusable;
  }
  const std::string& memory = dirs[0];
  const std::string charged =
      ReadValue(memory + (v2_ ? "/memory.current" : "/memory.usage_in_bytes"));
  reusable = reusable && !charged.empty() && std::stoull(charged) < kMaxChargeToReuse;
  if (reusable && !v2_) {  // v1 keeps a peak and a failure count per group; v2 has no reset
    reusable = WriteValue(memory + "/memory.max_usage_in_bytes", "0").ok() &&
               WriteValue(memory + "/memory.failcnt", "0").ok();
  }
  if (reusable) {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(dirs));
    return;
  }
  for (const std::string& dir : dirs)
    RemoveGroupDir(dir, v2_);
}

StatusOr<std::unique_ptr<CgroupTree>> CgroupTree::Create() {
  const std::string name = "kcoral-" + std::to_string(::getpid());
  struct statfs fs;
  if (::statfs(kRoot, &fs) != 0) {
    return FailedPreconditionError(std::string("cgroup: ") + kRoot + " is not mounted");
  }
  if (fs.f_type == CGROUP2_SUPER_MAGIC) {
    const std::string controllers = ReadValue(std::string(kRoot) + "/cgroup.controllers");
    for (const char* controller : {"memory", "pids"}) {
      if (!HasWord(controllers, controller)) {
        return FailedPreconditionError(std::string("cgroup: the v2 hierarchy at ") + kRoot +
                                       " has no " + controller + " controller");
      }
    }
    const std::string subtree = std::string(kRoot) + "/cgroup.subtree_control";
    if (!HasWord(ReadValue(subtree), "memory") || !HasWord(ReadValue(subtree), "pids"))
      KC_RETURN_IF_ERROR(WriteValue(subtree, "+memory +pids"));
    const std::string root = std::string(kRoot) + "/" + name;
    KC_RETURN_IF_ERROR(MakeDir(root));
    KC_RETURN_IF_ERROR(WriteValue(root + "/cgroup.subtree_control", "+memory +pids"));
    return std::unique_ptr<CgroupTree>(new CgroupTree({root}, /*v2=*/true));
  }
  std::vector<std::string> roots;
  for (const char* controller : {"memory", "pids"}) {
    const std::string hierarchy = std::string(kRoot) + "/" + controller;
    if (::access((hierarchy + "/cgroup.procs").c_str(), W_OK) != 0) {
      return FailedPreconditionError("cgroup: neither a v2 hierarchy at " + std::string(kRoot) +
                                     " nor a writable v1 " + controller + " controller at " +
                                     hierarchy);
    }
    roots.push_back(hierarchy + "/" + name);
    KC_RETURN_IF_ERROR(MakeDir(roots.back()));
  }
  return std::unique_ptr<CgroupTree>(new CgroupTree(std::move(roots), /*v2=*/false));
}

CgroupTree::~CgroupTree() {
  for (const auto& dirs : idle_)
    for (const std::string& dir : dirs)
      RemoveGroupDir(dir, v2_);
  for (const std::string& root : roots_)
    RemoveGroupDir(root, v2_);
}

StatusOr<WorkerCgroup> CgroupTree::NewWorkerGroup(const CgroupLimits& limits) {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      std::vector<std::string> dirs = std::move(idle_.back());
      idle_.pop_back();
      return WorkerCgroup(this, std::move(dirs), v2_);
    }
  }
  const std::string name = "w" + std::to_string(next_++);
  std::vector<std::string> dirs;
  for (const std::string& root : roots_)
    dirs.push_back(root + "/" + name);
  WorkerCgroup group(nullptr, dirs, v2_);  // removes what was made if a step fails
  for (const std::string& dir : dirs)
    KC_RETURN_IF_ERROR(MakeDir(dir));
  const std::string tasks = std::to_string(limits.max_tasks);
  const std::string memory = std::to_string(limits.memory_bytes);
  if (v2_) {
    KC_RETURN_IF_ERROR(WriteValue(dirs[0] + "/pids.max", tasks));
    if (limits.memory_bytes > 0) {
      KC_RETURN_IF_ERROR(WriteValue(dirs[0] + "/memory.max", memory));
      (void)WriteValue(dirs[0] + "/memory.swap.max", "0");  // absent without swap accounting
      KC_RETURN_IF_ERROR(WriteValue(dirs[0] + "/memory.oom.group", "1"));
    }
  } else {
    KC_RETURN_IF_ERROR(WriteValue(dirs[1] + "/pids.max", tasks));
    if (limits.memory_bytes > 0) {
      KC_RETURN_IF_ERROR(WriteValue(dirs[0] + "/memory.limit_in_bytes", memory));
      if (::access((dirs[0] + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0)
        (void)WriteValue(dirs[0] + "/memory.memsw.limit_in_bytes", memory);
    }
  }
  group.tree_ = this;
  return group;
}

}  // namespace kc::pool
