// WorkerSetup: what every new worker process gets before it starts (DESIGN.md
// "Sandbox"): a workspace of its own, and, when sandboxed, a cgroup with the
// limits and the spec the worker confines itself with (worker/sandbox.h).
//
// Thread-safe (the spawner threads of every device prepare workers).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "ipc/sandbox_spec.h"
#include "pool/worker_cgroup.h"
#include "pool/workspace.h"

namespace kc::pool {

struct SandboxOptions {
  bool enabled = true;
  bool private_network = true;
  std::vector<std::string> readonly_paths;  // beyond what workers always see
  CgroupLimits limits;
  uid_t uid = 65534;  // nobody
  gid_t gid = 65534;
};

// A worker's own resources; they go when the worker goes (after its tree).
struct WorkerResources {
  Workspace workspace;
  WorkerCgroup cgroup;  // empty when unsandboxed
};

struct PreparedWorker {
  WorkerResources resources;
  ipc::WorkerSpec spec;  // its workspace and, when sandboxed, its sandbox
};

class WorkerSetup {
 public:
  // Creates the workspace root and, when sandboxed, the cgroup subtree.
  // Fails (naming the part) where the sandbox cannot be had.
  static StatusOr<std::unique_ptr<WorkerSetup>> Create(SandboxOptions options);
  ~WorkerSetup();

  // `device_nodes`: the GPU's /dev/nvidia* nodes for a GPU worker.
  StatusOr<PreparedWorker> Prepare(const std::vector<std::string>& device_nodes);

  // For /health and the start event: the mode and its parts.
  nlohmann::json Describe() const;

 private:
  WorkerSetup(SandboxOptions options, std::filesystem::path root)
      : options_(std::move(options)), root_(std::move(root)) {}

  const SandboxOptions options_;
  const std::filesystem::path root_;  // kcoral-workspaces-XXXXXX
  std::unique_ptr<CgroupTree> cgroups_;
  std::atomic<int> next_{0};
};

}  // namespace kc::pool
