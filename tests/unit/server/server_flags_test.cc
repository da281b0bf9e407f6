#include "server/root/server_flags.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kc::server {
namespace {

// One parse of `args` (after the program name) with `env` as the whole environment.
struct Parse {
  ParsedFlags flags;
  std::string out;
  std::string err;
};

Parse Flags(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), "kcoral-server");
  std::vector<const char*> argv;
  for (const std::string& arg : args)
    argv.push_back(arg.c_str());
  Getenv getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  std::ostringstream out;
  std::ostringstream err;
  ParsedFlags flags =
      ParseServerFlags(static_cast<int>(argv.size()), argv.data(), getenv, out, err);
  return {std::move(flags), out.str(), err.str()};
}

TEST(ServerFlags, NoFlagsGiveTheDefaultsWithCachesUnderHome) {
  Parse parse = Flags({}, {{"HOME", "/home/k"}});
  ASSERT_TRUE(parse.flags.config) << parse.err;
  const ServerConfig& config = *parse.flags.config;
  EXPECT_EQ(config.device, Device::kGpu);  // the reference's default
  EXPECT_EQ(config.disk_cache_dir, "/home/k/.cache/kcoral/files");
  EXPECT_EQ(config.build_cache_dir, "/home/k/.cache/kcoral/builds");
  EXPECT_FALSE(config.tls.has_value());
  EXPECT_TRUE(parse.err.empty()) << parse.err;
}

TEST(ServerFlags, FlagsAndTheEnvironmentReachTheConfig) {
  Parse parse = Flags({"--device", "gpu", "--gpus", "0,3", "--workers-per-gpu", "2", "--port", "9"},
                      {{"XDG_CACHE_HOME", "/xdg"},
                       {"KCORAL_PYTHON", "/opt/py"},
                       {"KCORAL_PRELOAD", " numpy , json,, "},
                       {"KCORAL_MAX_LIBRARIES_PER_WORKER", " 7 "}});
  ASSERT_TRUE(parse.flags.config) << parse.err;
  const ServerConfig& config = *parse.flags.config;
  EXPECT_EQ(config.device, Device::kGpu);
  EXPECT_EQ(config.gpus, (std::vector<int>{0, 3}));
  EXPECT_EQ(config.workers_per_gpu, 2);
  EXPECT_EQ(config.port, 9);
  EXPECT_EQ(config.disk_cache_dir, "/xdg/kcoral/files");
  EXPECT_EQ(config.python, "/opt/py");
  EXPECT_EQ(config.worker_preload, (std::vector<std::string>{"numpy", "json"}));
  EXPECT_EQ(config.max_libraries_per_worker, 7u);
}

TEST(ServerFlags, HelpIsPrintedAndExitsZero) {
  Parse parse = Flags({"--help"});
  EXPECT_FALSE(parse.flags.config);
  EXPECT_EQ(parse.flags.exit_code, 0);
  EXPECT_NE(parse.out.find("--workers-per-gpu"), std::string::npos) << parse.out;
  EXPECT_NE(parse.out.find("KCoral server"), std::string::npos);
}

TEST(ServerFlags, AnUnknownFlagIsRefusedNamingIt) {
  Parse parse = Flags({"--no-such-flag"});
  EXPECT_FALSE(parse.flags.config);
  EXPECT_NE(parse.flags.exit_code, 0);
  EXPECT_NE(parse.err.find("--no-such-flag"), std::string::npos) << parse.err;
}

TEST(ServerFlags, ABadEnvironmentCountIsRefusedBeforeTheFlags) {
  Parse parse = Flags({"--help"}, {{"KCORAL_MAX_LIBRARIES_PER_WORKER", "many"}});
  EXPECT_EQ(parse.flags.exit_code, 2);
  EXPECT_EQ(parse.err,
            "kcoral server: KCORAL_MAX_LIBRARIES_PER_WORKER must be a non-negative integer, not "
            "'many'\n");
}

TEST(ServerFlags, AGpuOnlyFlagOnACpuServerIsRefused) {
  Parse parse = Flags({"--device", "cpu", "--cuda-max-connections", "2"});
  EXPECT_EQ(parse.flags.exit_code, 2);
  EXPECT_EQ(parse.err,
            "kcoral server: --cuda-max-connections applies to GPU servers (--device gpu)\n");
}

TEST(ServerFlags, AnIdleTenantShorterThanTwoAckWaitsIsRefusedWhenGiven) {
  Parse given = Flags({"--cluster", "nats://127.0.0.1:4222", "--cluster-ack-wait-seconds", "10",
                       "--cluster-idle-tenant-seconds", "15"});
  EXPECT_EQ(given.flags.exit_code, 2);
  EXPECT_NE(given.err.find("--cluster-idle-tenant-seconds 15 must be at least twice "
                           "--cluster-ack-wait-seconds (10)"),
            std::string::npos)
      << given.err;
  // Left out, it follows a long ack wait.
  Parse defaulted =
      Flags({"--cluster", "nats://127.0.0.1:4222", "--cluster-ack-wait-seconds", "900"});
  ASSERT_TRUE(defaulted.flags.config) << defaulted.err;
  EXPECT_EQ(defaulted.flags.config->cluster.idle_tenant, std::chrono::seconds(1800));
}

TEST(ServerFlags, AClusterPasswordWithoutAUserIsRefused) {
  Parse parse =
      Flags({"--cluster", "nats://127.0.0.1:4222"}, {{"KCORAL_CLUSTER_PASSWORD", "secret"}});
  EXPECT_EQ(parse.flags.exit_code, 2);
  EXPECT_NE(parse.err.find("--cluster-user is not"), std::string::npos) << parse.err;
}

TEST(ServerFlags, CudaVisibleDevicesOnAGpuServerIsANoteNotARefusal) {
  Parse parse = Flags({"--device", "gpu", "--gpus", "0"}, {{"CUDA_VISIBLE_DEVICES", "1"}});
  ASSERT_TRUE(parse.flags.config);
  EXPECT_NE(parse.err.find("note: CUDA_VISIBLE_DEVICES"), std::string::npos);
}

TEST(ValidateServerConfig, NamesEachCombinationThatCannotRun) {
  ServerConfig config;
  EXPECT_TRUE(ValidateServerConfig(config, {}).ok());

  ServerConfig gpu_without_gpus = config;
  gpu_without_gpus.device = Device::kGpu;
  gpu_without_gpus.gpus.clear();
  EXPECT_EQ(ValidateServerConfig(gpu_without_gpus, {}).message(),
            "--gpus must name at least one GPU in GPU mode");

  ServerConfig heap_over_limit = config;
  heap_over_limit.worker_heap_mbytes = 256;
  heap_over_limit.worker_memory_limit_mbytes = 256;
  EXPECT_EQ(ValidateServerConfig(heap_over_limit, {}).message(),
            "--worker-heap-mbytes (256) must be below --worker-memory-limit-mbytes (256): the heap "
            "is part of it");

  ServerConfig unsandboxed_paths = config;
  unsandboxed_paths.sandbox = SandboxMode::kNone;
  unsandboxed_paths.sandbox_readonly_paths = {"/data"};
  EXPECT_EQ(ValidateServerConfig(unsandboxed_paths, {}).message(),
            "--sandbox-readonly-path cannot be combined with --sandbox none");

  ServerConfig cpu = config;
  cpu.device = Device::kCpu;
  EXPECT_EQ(ValidateServerConfig(cpu, {"--housekeeping", "--off-lease-gpu-seconds"}).message(),
            "--housekeeping applies to GPU servers (--device gpu)");
}

}  // namespace
}  // namespace kc::server
