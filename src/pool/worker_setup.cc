#include "pool/worker_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/remove_tree.h"

namespace kc::pool {

StatusOr<std::unique_ptr<WorkerSetup>> WorkerSetup::Create(SandboxOptions options) {
  if (options.enabled && ::geteuid() != 0) {
    return FailedPreconditionError(
        "sandbox: namespaces, mounts and cgroups are set up by the server's workers as root "
        "before they drop to uid " +
        std::to_string(options.uid) + "; run the server as root");
  }
  std::string pattern =
      (std::filesystem::temp_directory_path() / "kcoral-workspaces-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    return InternalError("cannot create the workspace root in " +
                         std::filesystem::temp_directory_path().string());
  std::unique_ptr<WorkerSetup> setup(new WorkerSetup(std::move(options), pattern));
  // Workers cross the root to reach their own workspace, but cannot list it.
  ::chmod(pattern.c_str(), 0711);
  if (!setup->options_.enabled) return setup;
  if (::mkdir((setup->root_ / ".view").c_str(), 0755) != 0)
    return InternalError("cannot create the sandbox view's mount point");
  KC_ASSIGN_OR_RETURN(setup->cgroups_, CgroupTree::Create());
  return setup;
}

WorkerSetup::~WorkerSetup() {
  cgroups_.reset();
  RemoveTree(root_.string());
}

StatusOr<PreparedWorker> WorkerSetup::Prepare(const std::vector<std::string>& device_nodes) {
  PreparedWorker prepared;
  const bool sandboxed = options_.enabled;
  KC_ASSIGN_OR_RETURN(prepared.resources.workspace,
                      Workspace::Create(root_ / ("w" + std::to_string(next_++)),
                                        sandboxed ? options_.uid : static_cast<uid_t>(-1),
                                        sandboxed ? options_.gid : static_cast<gid_t>(-1)));
  prepared.spec.workspace = prepared.resources.workspace.path().string();
  if (!sandboxed) return prepared;
  KC_ASSIGN_OR_RETURN(prepared.resources.cgroup, cgroups_->NewWorkerGroup(options_.limits));
  ipc::SandboxSpec& sandbox = prepared.spec.sandbox.emplace();
  sandbox.workspace = prepared.spec.workspace;
  sandbox.new_root = (root_ / ".view").string();
  sandbox.readonly_paths = options_.readonly_paths;
  sandbox.device_nodes = device_nodes;
  sandbox.cgroup_procs = prepared.resources.cgroup.procs_files();
  sandbox.private_network = options_.private_network;
  sandbox.uid = options_.uid;
  sandbox.gid = options_.gid;
  return prepared;
}

nlohmann::json WorkerSetup::Describe() const {
  if (!options_.enabled) return {{"mode", "none"}};
  nlohmann::json parts = {"pid_namespace", "mount_namespace", "ipc_namespace", "uts_namespace"};
  if (options_.private_network) parts.push_back("network_namespace");
  for (const char* part : {"unprivileged_user", "no_capabilities", "no_new_privs", "seccomp"})
    parts.push_back(part);
  parts.push_back("cgroup_" + cgroups_->version());
  return {
      {"mode", "namespaces"},
      {"network", options_.private_network ? "none" : "host"},
      {"uid", options_.uid},
      {"parts", parts},
      {"max_processes", options_.limits.max_tasks},
      {"memory_limit_mbytes", options_.limits.memory_bytes >> 20},
      {"readonly_paths", options_.readonly_paths},
  };
}

}  // namespace kc::pool
