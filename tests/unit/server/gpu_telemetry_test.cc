#include "server/status/gpu_telemetry.h"

#include <gtest/gtest.h>

#include "base/nvml_library.h"

namespace kc::server {
namespace {

TEST(GpuTelemetry, ACpuServerReadsNothing) {
  EXPECT_EQ(GpuTelemetry({}).Read(), nlohmann::json::array());
}

TEST(GpuTelemetry, WithoutNvmlEachGpuSaysWhyAndKeepsItsName) {
  if (NvmlLibrary::Get().ok()) GTEST_SKIP() << "NVML is here; scripts/gpu-dashboard.sh checks it";
  const nlohmann::json readings = GpuTelemetry({{0, "GPU-aaaa"}, {3, "GPU-bbbb"}}).Read();
  ASSERT_EQ(readings.size(), 2u);
  EXPECT_EQ(readings[1]["gpu"], 3);
  EXPECT_EQ(readings[1]["uuid"], "GPU-bbbb");
  EXPECT_FALSE(readings[1].value("error", "").empty());
  EXPECT_FALSE(readings[1].contains("sm_mhz"));  // the page shows a dash
}

}  // namespace
}  // namespace kc::server
