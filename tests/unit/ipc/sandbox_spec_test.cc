// The wire form of a worker's spec (ipc/sandbox_spec.h), pinned: the server writes it, the
// zygote and the worker read it back.
#include "ipc/sandbox_spec.h"

#include <gtest/gtest.h>

namespace kc::ipc {
namespace {

SandboxSpec GpuWorkerSandbox() {
  SandboxSpec spec;
  spec.workspace = "/tmp/kcoral-workspaces-x/w3";
  spec.new_root = "/tmp/kcoral-workspaces-x/.view";
  spec.readonly_paths = {"/opt/data"};
  spec.device_nodes = {"/dev/nvidia0"};
  spec.cgroup_procs = {"/sys/fs/cgroup/kcoral-1/w3/cgroup.procs"};
  return spec;
}

TEST(SandboxSpec, GoldenWireForm) {
  EXPECT_EQ(Encode(GpuWorkerSandbox()).dump(),
            R"({"cgroup_procs":["/sys/fs/cgroup/kcoral-1/w3/cgroup.procs"],)"
            R"("device_nodes":["/dev/nvidia0"],"gid":65534,"network":"none",)"
            R"("new_root":"/tmp/kcoral-workspaces-x/.view","readonly_paths":["/opt/data"],)"
            R"("uid":65534,"workspace":"/tmp/kcoral-workspaces-x/w3"})");
}

TEST(SandboxSpec, DescriptorsAreWrittenOnlyOnceSet) {
  SandboxSpec spec = GpuWorkerSandbox();
  spec.private_network = false;
  spec.view_fd = 5;
  const nlohmann::json json = Encode(spec);
  EXPECT_EQ(json["network"], "host");
  EXPECT_EQ(json["view_fd"], 5);
  EXPECT_FALSE(json.contains("network_fd"));
}

TEST(SandboxSpec, RoundTrips) {
  SandboxSpec spec = GpuWorkerSandbox();
  spec.private_network = false;
  spec.view_fd = 5;
  spec.network_fd = 6;
  spec.uid = 1000;
  spec.gid = 1001;
  auto decoded = DecodeSandboxSpec(Encode(spec));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->workspace, spec.workspace);
  EXPECT_EQ(decoded->new_root, spec.new_root);
  EXPECT_EQ(decoded->readonly_paths, spec.readonly_paths);
  EXPECT_EQ(decoded->device_nodes, spec.device_nodes);
  EXPECT_EQ(decoded->cgroup_procs, spec.cgroup_procs);
  EXPECT_FALSE(decoded->private_network);
  EXPECT_EQ(decoded->view_fd, 5);
  EXPECT_EQ(decoded->network_fd, 6);
  EXPECT_EQ(decoded->uid, 1000u);
  EXPECT_EQ(decoded->gid, 1001u);
}

TEST(SandboxSpec, MissingOptionalFieldsTakeTheirDefaults) {
  auto decoded = DecodeSandboxSpec({{"workspace", "/w/w1"}, {"new_root", "/w/.view"}});
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(decoded->readonly_paths.empty());
  EXPECT_TRUE(decoded->private_network);
  EXPECT_EQ(decoded->view_fd, -1);
  EXPECT_EQ(decoded->network_fd, -1);
  EXPECT_EQ(decoded->uid, 65534u);
}

TEST(SandboxSpec, BadFieldsAreNamed) {
  const nlohmann::json good = Encode(GpuWorkerSandbox());
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* message;
  };
  const Case cases[] = {
      {"workspace", 7, "sandbox spec: field 'workspace' is not a string"},
      {"readonly_paths",
       {"/a", 1},
       "sandbox spec: field 'readonly_paths' is not an array of strings"},
      {"device_nodes", "/dev/nvidia0",
       "sandbox spec: field 'device_nodes' is not an array of strings"},
      {"network", "bridge", "sandbox spec: field 'network' is neither \"none\" nor \"host\""},
      {"uid", -1, "sandbox spec: field 'uid' is not a non-negative integer"},
      {"view_fd", "5", "sandbox spec: field 'view_fd' is not an integer"},
      {"new_root", "relative/.view", "sandbox spec: workspace and new_root must be absolute paths"},
      {"gid", 0, "sandbox spec: uid 0"},
  };
  for (const Case& c : cases) {
    nlohmann::json json = good;
    json[c.key] = c.value;
    auto decoded = DecodeSandboxSpec(json);
    ASSERT_FALSE(decoded.ok()) << c.key;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << c.key;
    EXPECT_EQ(decoded.status().message(), c.message) << c.key;
  }
  nlohmann::json missing = good;
  missing.erase("new_root");
  EXPECT_EQ(DecodeSandboxSpec(missing).status().message(),
            "sandbox spec: field 'new_root' is missing");
  EXPECT_EQ(DecodeSandboxSpec(nlohmann::json::array()).status().message(),
            "sandbox spec: not a JSON object");
}

TEST(WorkerSpec, WithAndWithoutASandbox) {
  const WorkerSpec bare{"/tmp/kcoral-workspaces-x/w1", std::nullopt};
  EXPECT_EQ(Encode(bare).dump(), R"({"sandbox":null,"workspace":"/tmp/kcoral-workspaces-x/w1"})");
  auto decoded = DecodeWorkerSpec(Encode(bare));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_FALSE(decoded->sandbox.has_value());

  const WorkerSpec boxed{"/tmp/kcoral-workspaces-x/w3", GpuWorkerSandbox()};
  decoded = DecodeWorkerSpec(Encode(boxed));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_TRUE(decoded->sandbox.has_value());
  EXPECT_EQ(decoded->sandbox->device_nodes, boxed.sandbox->device_nodes);

  EXPECT_TRUE(DecodeWorkerSpec({{"workspace", "/w/w1"}}).ok());  // no sandbox key: none
  EXPECT_EQ(DecodeWorkerSpec({{"workspace", "w1"}}).status().message(),
            "worker spec: field 'workspace' is not an absolute path");
  EXPECT_EQ(DecodeWorkerSpec({{"workspace", "/w/w1"}, {"sandbox", {{"workspace", "/w/w1"}}}})
                .status()
                .message(),
            "sandbox spec: field 'new_root' is missing");
}

}  // namespace
}  // namespace kc::ipc
