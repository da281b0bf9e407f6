#include "native/physical_floor.h"

#include <gtest/gtest.h>

namespace kc::native {
namespace {

// The H200: HBM3e at 3201 MHz on a 6144-bit bus.
constexpr double kH200 = 2.0 * 3201e6 * 6144 / 8;
constexpr uint64_t k256MiB = uint64_t{256} << 20;

SpanFindings Judge(const FloorInputs& in, nlohmann::json* floor = nullptr) {
  SpanFindings found;
  nlohmann::json out = ApplyPhysicalFloor(in, found);
  if (floor != nullptr) *floor = out;
  return found;
}

TEST(PhysicalFloorTest, AnHonestMultiplyOfAQuarterGibibyteIsAboveItsFloor) {
  // torch.mul over 64 Mi float32 writes 256 MiB in ~127 us on the H200; the floor is ~55 us.
  nlohmann::json floor;
  SpanFindings found = Judge({k256MiB, k256MiB, kH200, 0.127, 0}, &floor);
  EXPECT_TRUE(found.flags.empty());
  EXPECT_TRUE(found.conditions.empty());
  EXPECT_NEAR(floor["floor_ms"].get<double>(), 0.0546, 0.001);
  EXPECT_EQ(floor["bytes_changed"], k256MiB);
}

TEST(PhysicalFloorTest, AMedianBelowTheFloorIsFlaggedWithItsFigures) {
  SpanFindings found = Judge({k256MiB, k256MiB, kH200, 0.0012, 0});
  ASSERT_EQ(found.flags.size(), 1u);
  EXPECT_NE(found.flags[0].find("below the physical floor"), std::string::npos);
  EXPECT_NE(found.flags[0].find("268435456 bytes"), std::string::npos);
  EXPECT_NE(found.flags[0].find("4917 GB/s"), std::string::npos);
}

TEST(PhysicalFloorTest, AFewRowsChangedInALargeBufferHaveAFloorOfThoseRows) {
  // index_add_ of 64 rows of 1 KiB into a 256 MiB buffer: a 3 us call is honest.
  SpanFindings found = Judge({64 * 1024, k256MiB, kH200, 0.003, 0});
  EXPECT_TRUE(found.flags.empty());
}

TEST(PhysicalFloorTest, AZeroMedianIsFlaggedUnlessTheOutputsAreEmpty) {
  EXPECT_EQ(Judge({k256MiB, k256MiB, kH200, 0.0, 0}).flags.size(), 1u);
  // Outputs unchanged by the call, but holding elements: still not a possible 0.
  EXPECT_EQ(Judge({0, 4096, kH200, 0.0, 0}).flags.size(), 1u);
  // Empty tensors: nothing to write, no launch; a condition, trusted.
  SpanFindings empty = Judge({0, 0, kH200, 0.0, 100});
  EXPECT_TRUE(empty.flags.empty());
  EXPECT_EQ(empty.conditions.size(), 1u);
}

TEST(PhysicalFloorTest, CallsWithoutGpuActivityThatWriteTheirOutputsAreFlagged) {
  SpanFindings found = Judge({4096, 4096, kH200, 0.002, 3});
  ASSERT_EQ(found.flags.size(), 1u);
  EXPECT_NE(found.flags[0].find("3 timed calls showed no GPU activity"), std::string::npos);
}

TEST(PhysicalFloorTest, AnUnknownBandwidthIsFlaggedNotPassed) {
  nlohmann::json floor;
  SpanFindings found = Judge({k256MiB, k256MiB, 0, 0.001, 0}, &floor);
  ASSERT_EQ(found.flags.size(), 1u);
  EXPECT_NE(found.flags[0].find("peak memory bandwidth could not be read"), std::string::npos);
  EXPECT_EQ(floor["floor_ms"].get<double>(), 0.0);
}

TEST(PhysicalFloorTest, AnUnknownBandwidthIsNoMatterWhenNothingChanged) {
  EXPECT_TRUE(Judge({0, 0, 0, 0.001, 0}).flags.empty());
}

}  // namespace
}  // namespace kc::native
