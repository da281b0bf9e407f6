#include "ipc/sandbox_spec.h"

#include "protocol/json_fields.h"

namespace kc::ipc {
namespace {

// The wire's keys and texts: here and nowhere else.
constexpr char kWorkspace[] = "workspace";
constexpr char kSandbox[] = "sandbox";
constexpr char kNewRoot[] = "new_root";
constexpr char kReadonlyPaths[] = "readonly_paths";
constexpr char kDeviceNodes[] = "device_nodes";
constexpr char kCgroupProcs[] = "cgroup_procs";
constexpr char kNetwork[] = "network";
constexpr char kUid[] = "uid";
constexpr char kGid[] = "gid";
constexpr char kViewFd[] = "view_fd";
constexpr char kNetworkFd[] = "network_fd";
constexpr char kPrivateNetwork[] = "none";  // only loopback
constexpr char kHostNetwork[] = "host";

bool IsAbsolute(const std::string& path) {
  return !path.empty() && path[0] == '/';
}

// An optional descriptor field: -1 when missing.
Status ReadFd(const protocol::JsonFields& fields, const char* key, int* out) {
  int64_t fd = -1;
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(key, &fd));
  if (fd < -1 || fd > INT32_MAX) return fields.Bad(key, "not a descriptor");
  *out = static_cast<int>(fd);
  return Status::Ok();
}

Status ReadId(const protocol::JsonFields& fields, const char* key, uint32_t* out) {
  uint64_t id = *out;
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(key, &id));
  if (id > UINT32_MAX - 1) return fields.Bad(key, "not a user or group id");
  *out = static_cast<uint32_t>(id);
  return Status::Ok();
}

}  // namespace

nlohmann::json Encode(const SandboxSpec& spec) {
  nlohmann::json json = {
      {kWorkspace, spec.workspace},
      {kNewRoot, spec.new_root},
      {kReadonlyPaths, spec.readonly_paths},
      {kDeviceNodes, spec.device_nodes},
      {kCgroupProcs, spec.cgroup_procs},
      {kNetwork, spec.private_network ? kPrivateNetwork : kHostNetwork},
      {kUid, spec.uid},
      {kGid, spec.gid},
  };
  if (spec.view_fd >= 0) json[kViewFd] = spec.view_fd;
  if (spec.network_fd >= 0) json[kNetworkFd] = spec.network_fd;
  return json;
}

nlohmann::json Encode(const WorkerSpec& spec) {
  return {{kWorkspace, spec.workspace},
          {kSandbox, spec.sandbox ? Encode(*spec.sandbox) : nlohmann::json(nullptr)}};
}

StatusOr<SandboxSpec> DecodeSandboxSpec(const nlohmann::json& json) {
  protocol::JsonFields fields(json, "sandbox spec");
  KC_RETURN_IF_ERROR(fields.IsObject());
  SandboxSpec spec;
  KC_RETURN_IF_ERROR(fields.Read(kWorkspace, &spec.workspace));
  KC_RETURN_IF_ERROR(fields.Read(kNewRoot, &spec.new_root));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(kReadonlyPaths, &spec.readonly_paths));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(kDeviceNodes, &spec.device_nodes));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(kCgroupProcs, &spec.cgroup_procs));
  std::string network = kPrivateNetwork;
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(kNetwork, &network));
  if (network != kPrivateNetwork && network != kHostNetwork) {
    return fields.Bad(kNetwork, "neither \"none\" nor \"host\"");
  }
  spec.private_network = network == kPrivateNetwork;
  KC_RETURN_IF_ERROR(ReadId(fields, kUid, &spec.uid));
  KC_RETURN_IF_ERROR(ReadId(fields, kGid, &spec.gid));
  KC_RETURN_IF_ERROR(ReadFd(fields, kViewFd, &spec.view_fd));
  KC_RETURN_IF_ERROR(ReadFd(fields, kNetworkFd, &spec.network_fd));
  if (!IsAbsolute(spec.workspace) || !IsAbsolute(spec.new_root)) {
    return InvalidArgumentError("sandbox spec: workspace and new_root must be absolute paths");
  }
  if (spec.uid == 0 || spec.gid == 0) return InvalidArgumentError("sandbox spec: uid 0");
  return spec;
}

StatusOr<WorkerSpec> DecodeWorkerSpec(const nlohmann::json& json) {
  protocol::JsonFields fields(json, "worker spec");
  KC_RETURN_IF_ERROR(fields.IsObject());
  WorkerSpec spec;
  KC_RETURN_IF_ERROR(fields.Read(kWorkspace, &spec.workspace));
  if (!IsAbsolute(spec.workspace)) return fields.Bad(kWorkspace, "not an absolute path");
  const nlohmann::json* sandbox = fields.Find(kSandbox);
  if (sandbox != nullptr && !sandbox->is_null()) {
    KC_ASSIGN_OR_RETURN(spec.sandbox, DecodeSandboxSpec(*sandbox));
  }
  return spec;
}

}  // namespace kc::ipc
