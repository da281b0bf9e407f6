#include "native/gpu_snapshot.h"

#include <gtest/gtest.h>

#include "native/clock_events.h"

namespace kc::native {
namespace {

TEST(GpuSnapshotJson, EmptyFieldsAreNull) {
  GpuSnapshot snapshot;
  snapshot.cuda_device = 0;
  snapshot.uuid = "GPU-1234";
  snapshot.sm_mhz = 1980;
  snapshot.errors = {"power_w: Insufficient Permissions (4)"};
  nlohmann::json json = ToJson(snapshot);
  EXPECT_EQ(json["cuda_device"], 0);
  EXPECT_EQ(json["uuid"], "GPU-1234");
  EXPECT_EQ(json["sm_mhz"], 1980);
  EXPECT_TRUE(json["mem_mhz"].is_null());
  EXPECT_TRUE(json["power_w"].is_null());
  EXPECT_TRUE(json["clock_event_reasons"].is_null());
  EXPECT_TRUE(json["throttle_reasons"].is_null());
  EXPECT_EQ(json["errors"].size(), 1u);
  for (const char* key :
       {"pci_bus_id", "name", "driver_version", "app_sm_mhz", "app_mem_mhz", "default_app_sm_mhz",
        "default_app_mem_mhz", "max_sm_mhz", "max_mem_mhz", "temp_c"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json.size(), 18u);
}

TEST(GpuSnapshotJson, ReasonsComeWithTheirNames) {
  GpuSnapshot snapshot;
  snapshot.clock_event_reasons = kClockEventGpuIdle | kClockEventSwPowerCap;
  snapshot.power_w = 123.456;
  nlohmann::json json = ToJson(snapshot);
  EXPECT_EQ(json["clock_event_reasons"], 5);
  EXPECT_EQ(json["throttle_reasons"], nlohmann::json::array({"gpu idle", "sw power cap"}));
  EXPECT_DOUBLE_EQ(json["power_w"].get<double>(), 123.456);
}

}  // namespace
}  // namespace kc::native
