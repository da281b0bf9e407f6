// The wire form of a worker's settings (ipc/worker_settings.h), pinned: the server writes them
// in the start message, the worker reads them back.
#include "ipc/worker_settings.h"

#include <gtest/gtest.h>

namespace kc::ipc {
namespace {

WorkerSettings GpuSettings() {
  WorkerSettings settings;
  settings.device = WorkerDevice::kGpu;
  settings.heap_bytes = 64 << 20;
  settings.gpu_arch = "sm_90a";
  settings.max_libraries = 16;
  settings.preload = std::vector<std::string>{"torch", "numpy"};
  return settings;
}

TEST(WorkerSettings, GoldenWireForm) {
  EXPECT_EQ(Encode(GpuSettings()).dump(),
            R"({"address_space_mbytes":0,"cpu_execution":"host","device":"gpu",)"
            R"("gpu_arch":"sm_90a","heap_bytes":67108864,"max_libraries":16,)"
            R"("preload":["torch","numpy"]})");
  WorkerSettings cpu;
  cpu.cpu_execution = CpuExecution::kReference;
  cpu.address_space_mbytes = 2048;
  EXPECT_EQ(Encode(cpu).dump(),
            R"({"address_space_mbytes":2048,"cpu_execution":"reference","device":"cpu",)"
            R"("gpu_arch":"","heap_bytes":0,"max_libraries":256})");
}

TEST(WorkerSettings, RoundTrips) {
  auto decoded = DecodeWorkerSettings(Encode(GpuSettings()));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->device, WorkerDevice::kGpu);
  EXPECT_EQ(decoded->cpu_execution, CpuExecution::kHost);
  EXPECT_EQ(decoded->heap_bytes, uint64_t{64} << 20);
  EXPECT_EQ(decoded->gpu_arch, "sm_90a");
  EXPECT_EQ(decoded->max_libraries, 16u);
  EXPECT_EQ(decoded->preload, (std::vector<std::string>{"torch", "numpy"}));
}

TEST(WorkerSettings, AnEmptyPreloadIsNotTheDefault) {
  WorkerSettings settings;
  settings.preload = std::vector<std::string>{};  // KCORAL_PRELOAD="": import nothing
  auto decoded = DecodeWorkerSettings(Encode(settings));
  ASSERT_TRUE(decoded.ok());
  ASSERT_TRUE(decoded->preload.has_value());
  EXPECT_TRUE(decoded->preload->empty());
}

TEST(WorkerSettings, MissingFieldsTakeTheirDefaults) {
  auto decoded = DecodeWorkerSettings({{"device", "gpu"}});
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->device, WorkerDevice::kGpu);
  EXPECT_EQ(decoded->cpu_execution, CpuExecution::kHost);
  EXPECT_EQ(decoded->address_space_mbytes, 0u);
  EXPECT_EQ(decoded->max_libraries, 256u);
  EXPECT_FALSE(decoded->preload.has_value());
}

TEST(WorkerSettings, BadFieldsAreNamed) {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* message;
  };
  const Case cases[] = {
      {"device", "tpu", "worker settings: field 'device' is not a known value"},
      {"device", 1, "worker settings: field 'device' is not a string"},
      {"cpu_execution", "remote", "worker settings: field 'cpu_execution' is not a known value"},
      {"heap_bytes", -1, "worker settings: field 'heap_bytes' is not a non-negative integer"},
      {"max_libraries", "256",
       "worker settings: field 'max_libraries' is not a non-negative integer"},
      {"gpu_arch", 90, "worker settings: field 'gpu_arch' is not a string"},
      {"preload", "torch", "worker settings: field 'preload' is not an array of strings"},
  };
  for (const Case& c : cases) {
    auto decoded = DecodeWorkerSettings({{c.key, c.value}});
    ASSERT_FALSE(decoded.ok()) << c.key;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << c.key;
    EXPECT_EQ(decoded.status().message(), c.message) << c.key;
  }
  EXPECT_EQ(DecodeWorkerSettings("gpu").status().message(), "worker settings: not a JSON object");
}

TEST(WorkerSettings, TextsAreTheOnesPythonComparesAgainst) {
  EXPECT_EQ(TextOf(WorkerDevice::kCpu), "cpu");
  EXPECT_EQ(TextOf(WorkerDevice::kGpu), "gpu");
  EXPECT_EQ(TextOf(CpuExecution::kHost), "host");
  EXPECT_EQ(TextOf(CpuExecution::kReference), "reference");
}

}  // namespace
}  // namespace kc::ipc
