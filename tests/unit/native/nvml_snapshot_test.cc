#include "native/nvml_snapshot.h"

#include <dlfcn.h>

#include <gtest/gtest.h>

#include "fake_nvml.h"
#include "native/clock_events.h"

namespace kc::native {
namespace {

// KC_FAKE_NVML and KC_FAKE_NVML_OLD are the fake libraries' paths (CMakeLists.txt).
FakeNvml& FakeOf(const char* path) {
  FakeNvml* fake = FakeNvmlAt(path);  // the handle NvmlLibrary::Load got too
  EXPECT_NE(fake, nullptr) << dlerror();
  return *fake;
}

class NvmlSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override { FakeOf(KC_FAKE_NVML) = FakeNvml{}; }
  FakeNvml& fake() { return FakeOf(KC_FAKE_NVML); }
};

TEST_F(NvmlSnapshotTest, ReadsEveryField) {
  StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(KC_FAKE_NVML);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  StatusOr<GpuSnapshot> snapshot = ReadNvmlSnapshot(*nvml, "00000000:19:00.0");
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().message();
  EXPECT_EQ(snapshot->pci_bus_id, "00000000:19:00.0");
  EXPECT_EQ(snapshot->uuid, "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_EQ(snapshot->name, "NVIDIA H200");
  EXPECT_EQ(snapshot->driver_version, "580.95.05");
  EXPECT_EQ(snapshot->sm_mhz, 1980u);
  EXPECT_EQ(snapshot->mem_mhz, 3201u);
  EXPECT_EQ(snapshot->app_sm_mhz, 1980u);
  EXPECT_EQ(snapshot->default_app_mem_mhz, 3201u);
  EXPECT_EQ(snapshot->max_sm_mhz, 1980u);
  EXPECT_EQ(snapshot->clock_event_reasons, 0x5u);
  EXPECT_EQ(snapshot->temp_c, 41u);
  EXPECT_DOUBLE_EQ(snapshot->power_w.value(), 123.456);
  EXPECT_TRUE(snapshot->errors.empty());
  EXPECT_EQ(fake().reasons_calls, 1);  // the newer call is preferred
  EXPECT_EQ(fake().throttle_calls, 0);
  EXPECT_EQ(ToJson(*snapshot)["throttle_reasons"],
            nlohmann::json::array({"gpu idle", "sw power cap"}));
}

TEST_F(NvmlSnapshotTest, UnsupportedFieldsAreNullAndOtherFailuresListed) {
  StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(KC_FAKE_NVML);
  ASSERT_TRUE(nvml.ok());
  fake().field_result = kNvmlErrorNotSupported;
  fake().power_result = 4;  // NVML_ERROR_NO_PERMISSION
  StatusOr<GpuSnapshot> snapshot = ReadNvmlSnapshot(*nvml, "00000000:19:00.0");
  ASSERT_TRUE(snapshot.ok());
  EXPECT_FALSE(snapshot->sm_mhz.has_value());
  EXPECT_FALSE(snapshot->clock_event_reasons.has_value());
  EXPECT_FALSE(snapshot->temp_c.has_value());
  EXPECT_FALSE(snapshot->power_w.has_value());
  EXPECT_EQ(snapshot->errors, std::vector<std::string>{"power_w: Insufficient Permissions (4)"});
}

TEST_F(NvmlSnapshotTest, UnknownBusIdIsUnavailable) {
  StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(KC_FAKE_NVML);
  ASSERT_TRUE(nvml.ok());
  StatusOr<GpuSnapshot> snapshot = ReadNvmlSnapshot(*nvml, "00000000:AA:00.0");
  EXPECT_EQ(snapshot.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(snapshot.status().message().find("00000000:AA:00.0"), std::string::npos);
}

TEST_F(NvmlSnapshotTest, FailedInitIsUnavailable) {
  fake().init_result = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(KC_FAKE_NVML);
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("nvmlInit_v2: Fake Error (9)"), std::string::npos)
      << nvml.status().message();
}

TEST(NvmlLibrary, MissingLibraryIsUnavailable) {
  StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load("libkc-no-such-nvml.so.1");
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("libkc-no-such-nvml.so.1"), std::string::npos);
}

TEST(NvmlLibrary, OlderDriversFallBackToThrottleReasons) {
  StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(KC_FAKE_NVML_OLD);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  FakeNvml& old = FakeOf(KC_FAKE_NVML_OLD);
  old.reasons = kClockEventHwSlowdown;
  StatusOr<GpuSnapshot> snapshot = ReadNvmlSnapshot(*nvml, old.bus_id);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->clock_event_reasons, kClockEventHwSlowdown);
  EXPECT_EQ(old.throttle_calls, 1);
}

}  // namespace
}  // namespace kc::native
