#include "worker/sandbox_spec.h"

namespace kc::worker {

StatusOr<SandboxSpec> ParseSandboxSpec(const nlohmann::json& json) {
  SandboxSpec spec;
  try {
    spec.workspace = json.at("workspace").get<std::string>();
    spec.new_root = json.at("new_root").get<std::string>();
    spec.readonly_paths = json.value("readonly_paths", std::vector<std::string>{});
    spec.device_nodes = json.value("device_nodes", std::vector<std::string>{});
    spec.cgroup_procs = json.value("cgroup_procs", std::vector<std::string>{});
    spec.private_network = json.value("network", std::string("none")) == "none";
    spec.uid = json.value("uid", 65534u);
    spec.gid = json.value("gid", 65534u);
    spec.view_fd = json.value("view_fd", -1);
    spec.network_fd = json.value("network_fd", -1);
  } catch (const nlohmann::json::exception& error) {
    return InvalidArgumentError(std::string("sandbox spec: ") + error.what());
  }
  if (spec.workspace.empty() || spec.workspace[0] != '/' || spec.new_root.empty() ||
      spec.new_root[0] != '/') {
    return InvalidArgumentError("sandbox spec: workspace and new_root must be absolute paths");
  }
  if (spec.uid == 0 || spec.gid == 0) return InvalidArgumentError("sandbox spec: uid 0");
  return spec;
}

}  // namespace kc::worker
