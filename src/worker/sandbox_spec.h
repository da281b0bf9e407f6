// SandboxSpec: what the server asks a worker to confine itself to, sent as
// JSON in the zygote's fork frame (or KCORAL_SANDBOX_SPEC for workers started
// without a zygote) and applied by EnterSandbox (sandbox.h) before any user
// code runs. docs/sandbox.md explains the parts.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::worker {

struct SandboxSpec {
  std::string workspace;                    // host directory bound at /work
  std::string new_root;                     // empty host directory the view is built on
  std::vector<std::string> readonly_paths;  // bound read-only at the same path
  std::vector<std::string> device_nodes;    // e.g. /dev/nvidia0; /dev/null and friends always
  std::vector<std::string> cgroup_procs;    // cgroup.procs files the worker joins first
  bool private_network = true;              // a network namespace with only loopback
  // Inherited descriptors, added by the zygote: the view's template mount
  // namespace (view_templates.h) and, with a private network, the network
  // namespace to join (network_namespaces.h).
  int view_fd = -1;
  int network_fd = -1;
  uid_t uid = 65534;
  gid_t gid = 65534;
};

StatusOr<SandboxSpec> ParseSandboxSpec(const nlohmann::json& json);

}  // namespace kc::worker
