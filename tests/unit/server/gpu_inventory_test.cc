#include "server/status/gpu_inventory.h"

#include <gtest/gtest.h>

namespace kc::server {
namespace {

// QueryGpu runs nvidia-smi and needs a GPU; only the pure mapping is tested.

TEST(ArchFromComputeCapability, HopperGetsTheArchSpecificSuffix) {
  EXPECT_EQ(ArchFromComputeCapability("9.0"), "sm_90a");
}

TEST(ArchFromComputeCapability, BlackwellGetsTheArchSpecificSuffix) {
  EXPECT_EQ(ArchFromComputeCapability("10.0"), "sm_100a");
  EXPECT_EQ(ArchFromComputeCapability("12.0"), "sm_120a");
}

TEST(ArchFromComputeCapability, PreHopperHasNoSuffix) {
  EXPECT_EQ(ArchFromComputeCapability("8.6"), "sm_86");
  EXPECT_EQ(ArchFromComputeCapability("8.0"), "sm_80");
  EXPECT_EQ(ArchFromComputeCapability("7.5"), "sm_75");
}

TEST(ArchFromComputeCapability, MalformedCapabilityGivesEmpty) {
  EXPECT_EQ(ArchFromComputeCapability(""), "");
  EXPECT_EQ(ArchFromComputeCapability("90"), "");
  EXPECT_EQ(ArchFromComputeCapability("."), "");
  EXPECT_EQ(ArchFromComputeCapability(".0"), "");
  EXPECT_EQ(ArchFromComputeCapability("9."), "");
  EXPECT_EQ(ArchFromComputeCapability("x.0"), "");
  EXPECT_EQ(ArchFromComputeCapability("9.x"), "");
  EXPECT_EQ(ArchFromComputeCapability("[N/A]"), "");
  EXPECT_EQ(ArchFromComputeCapability("99999999999.0"), "");
}

}  // namespace
}  // namespace kc::server
