#include "native/activity_attribution.h"

#include <gtest/gtest.h>

namespace kc::native {
namespace {

DeviceRecord Kernel(uint64_t start, uint64_t end, uint32_t correlation) {
  return {start, end, correlation, ActivityIdentity{10, 1, 0, 0}};
}

TEST(ActivityAttributionTest, SpanOfTheActivitiesLaunchedInTheWindow) {
  ActivityRecords records;
  records.api = {{105, 7}};
  records.device = {Kernel(110, 150, 7), Kernel(50, 90, 3)};  // the second is the flush
  auto result = AttributeToWindows(records, {{100, 120, 200}});
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->spans_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(result->spans_ms[0], 40e-6);
  EXPECT_EQ(result->unattributed_activities, 0);
}

TEST(ActivityAttributionTest, WorkWithHiddenApiRecordsIsTimedByDeviceTime) {
  ActivityRecords records;
  records.api = {{105, 7}};  // only the 1-element launch kept its API record
  records.device = {Kernel(110, 112, 7), Kernel(115, 240, 8)};
  auto result = AttributeToWindows(records, {{100, 120, 250}});
  ASSERT_TRUE(result.ok());
  EXPECT_DOUBLE_EQ(result->spans_ms[0], 130e-6);
  EXPECT_EQ(result->unattributed_activities, 1);
}

TEST(ActivityAttributionTest, ChecksAfterTheDrainAreNotTheCalls) {
  ActivityRecords records;
  records.api = {{105, 7}, {260, 9}};
  records.device = {Kernel(110, 150, 7), Kernel(265, 300, 9)};
  auto result = AttributeToWindows(records, {{100, 120, 250}});
  ASSERT_TRUE(result.ok());
  EXPECT_DOUBLE_EQ(result->spans_ms[0], 40e-6);
}

// A call on zero-size tensors launches nothing: its sample is 0, not an error.
TEST(ActivityAttributionTest, WindowWithoutGpuWorkHasASpanOfZero) {
  ActivityRecords records;
  records.api = {{305, 2}};
  records.device = {Kernel(310, 350, 2)};
  auto result = AttributeToWindows(records, {{100, 120, 250}, {300, 320, 400}});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_DOUBLE_EQ(result->spans_ms[0], 0.0);
  EXPECT_DOUBLE_EQ(result->spans_ms[1], 40e-6);
  EXPECT_EQ(result->empty_windows, 1);
}

TEST(ActivityAttributionTest, GraphLaunchedActivitiesAreCounted) {
  ActivityRecords records;
  records.api = {{105, 7}};
  DeviceRecord replayed = Kernel(110, 150, 7);
  replayed.graph_id = 3;
  records.device = {replayed, Kernel(160, 170, 7)};
  auto result = AttributeToWindows(records, {{100, 120, 200}});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->graph_activities, 1);
  EXPECT_DOUBLE_EQ(result->spans_ms[0], 60e-6);
}

TEST(ActivityAttributionTest, StabilityPerGroupOfWindows) {
  ActivityRecords records;
  records.api = {{105, 1}, {305, 2}, {505, 3}};
  records.device = {
      Kernel(110, 150, 1), Kernel(310, 350, 2), {510, 550, 3, ActivityIdentity{10, 2, 0, 0}}};
  auto result = AttributeToWindows(records, {{100, 120, 200}, {300, 320, 400}, {500, 520, 600}});
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(StableAmong(*result, {0, 1}));
  EXPECT_FALSE(StableAmong(*result, {0, 1, 2}));
  EXPECT_TRUE(StableAmong(*result, {2}));
}

}  // namespace
}  // namespace kc::native
