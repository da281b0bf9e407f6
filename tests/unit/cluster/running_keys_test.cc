#include "cluster/running_keys.h"

#include <gtest/gtest.h>

namespace kc::cluster {
namespace {

TEST(RunningKeys, AKeyIsHeldByOneRunAtATimeAndListedWhileHeld) {
  RunningKeys running;
  EXPECT_TRUE(running.Hold("k-a"));
  EXPECT_FALSE(running.Hold("k-a"));  // a second delivery of the same message waits
  EXPECT_TRUE(running.Hold("k-b"));
  EXPECT_EQ(running.List(), nlohmann::json::array({"k-a", "k-b"}));
  running.Release("k-a");
  EXPECT_EQ(running.List(), nlohmann::json::array({"k-b"}));
  EXPECT_TRUE(running.Hold("k-a"));  // free again once the first let go
}

}  // namespace
}  // namespace kc::cluster
