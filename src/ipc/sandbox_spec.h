// SandboxSpec and WorkerSpec: what the server asks a new worker to confine itself to, and the one
// place their fields are spelled on the wire.
//
// The pool builds a WorkerSpec per worker (pool/worker_setup.h) and sends it in the zygote's fork
// message, or in the start message of a worker started without a zygote (ipc/messages.h). The
// zygote completes the sandbox with what only it knows (the interpreter's paths, the descriptors
// of the view's template and of a lent network namespace: kcoral._core.complete_sandbox) and the
// worker applies it with EnterSandbox (worker/sandbox.h) before any user code runs.
// docs/sandbox.md explains the parts.
//
// Wire form (Encode; DecodeWorkerSpec reads it back):
//   {"workspace": "/tmp/kcoral-workspaces-x/w3",
//    "sandbox": null | {"workspace": ..., "new_root": ..., "readonly_paths": [...],
//                       "device_nodes": [...], "cgroup_procs": [...],
//                       "network": "none" | "host", "uid": 65534, "gid": 65534,
//                       "view_fd"?: 5, "network_fd"?: 6}}
// view_fd and network_fd are set only by the zygote's completion (never by the server), and
// written only when set.
//
// Plain values; Decode never throws.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::ipc {

struct SandboxSpec {
  std::string workspace;                    // host directory bound at /work
  std::string new_root;                     // empty host directory the view is built on
  std::vector<std::string> readonly_paths;  // bound read-only at the same path
  std::vector<std::string> device_nodes;    // e.g. /dev/nvidia0; /dev/null and friends always
  std::vector<std::string> cgroup_procs;    // cgroup.procs files the worker joins first
  bool private_network = true;              // a network namespace with only loopback
  // Inherited descriptors, added by the zygote: the view's template mount
  // namespace (worker/view_templates.h) and, with a private network, the network
  // namespace to join (worker/network_namespaces.h). -1: not (yet) there.
  int view_fd = -1;
  int network_fd = -1;
  uid_t uid = 65534;
  gid_t gid = 65534;
};

struct WorkerSpec {
  std::string workspace;               // the worker's own directory on the host
  std::optional<SandboxSpec> sandbox;  // nullopt: --sandbox none
};

nlohmann::json Encode(const SandboxSpec& spec);
nlohmann::json Encode(const WorkerSpec& spec);

// kInvalidArgument naming the field: a field of the wrong type, a missing or relative workspace
// or new_root, uid or gid 0. Missing lists are empty; a missing network is "none".
StatusOr<SandboxSpec> DecodeSandboxSpec(const nlohmann::json& json);
StatusOr<WorkerSpec> DecodeWorkerSpec(const nlohmann::json& json);

}  // namespace kc::ipc
