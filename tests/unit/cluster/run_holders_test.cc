#include "cluster/run_holders.h"

#include <gtest/gtest.h>

#include "cluster/pool_view.h"

namespace kc::cluster {
namespace {

using std::chrono::seconds;

const nlohmann::json kCpuPool = {{"pool", "cpu"}, {"versions", {{"python", "3.11"}}}};

nlohmann::json Record(std::vector<std::string> running) {
  return {{"running", running}, {"pools", {kCpuPool}}};
}

class RunHoldersTest : public ::testing::Test {
 protected:
  RunHolders holders{/*lease=*/seconds(15), /*silent_after=*/seconds(2)};
  const Clock::time_point t0 = Clock::now();
  const std::string pool = PoolIdOf(kCpuPool);
};

TEST_F(RunHoldersTest, TheNodeWhoseLastRecordListsTheKeyHoldsIt) {
  holders.Heard("a", Record({}), t0);
  holders.Heard("b", Record({"k1", "k2"}), t0);
  const auto holder = holders.HolderOf("k2", pool, "a", t0 + seconds(1));
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->node_id, "b");
  EXPECT_TRUE(holder->listed);
  EXPECT_EQ(holder->heard, t0);
  EXPECT_FALSE(holders.HolderOf("k3", pool, "a", t0 + seconds(1)).has_value());
}

TEST_F(RunHoldersTest, ASilentHolderIsBelievedUntilTheLeaseRunsOut) {
  holders.Heard("b", Record({"k"}), t0);
  EXPECT_TRUE(holders.HolderOf("k", pool, "a", t0 + seconds(15)).has_value());
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0 + seconds(16)).has_value());
}

TEST_F(RunHoldersTest, ARecordWithoutTheKeyLetsGoOfIt) {
  holders.Heard("b", Record({"k"}), t0);
  holders.Heard("b", Record({}), t0 + seconds(1));
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0 + seconds(1)).has_value());
}

TEST_F(RunHoldersTest, ARestartedNodesRecordReplacesItsLastLifes) {
  holders.Heard("b", Record({"k"}), t0);
  nlohmann::json restarted = Record({});
  restarted["instance_id"] = "new-life";
  holders.Heard("b", restarted, t0 + seconds(3));
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0 + seconds(3)).has_value());
}

TEST_F(RunHoldersTest, AnOlderRecordHeardLateReplacesNothing) {
  holders.Heard("b", Record({"k"}), t0 + seconds(2));
  holders.Heard("b", Record({}), t0);  // a watch made again replays it, or a late send
  EXPECT_TRUE(holders.HolderOf("k", pool, "a", t0 + seconds(3)).has_value());
}

TEST_F(RunHoldersTest, ANodeThatLeftHoldsNothing) {
  holders.Heard("b", Record({"k"}), t0);
  holders.Left("b");
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0 + seconds(1)).has_value());
}

TEST_F(RunHoldersTest, ANodeOfThePoolSilentPastTwoBeatsMayHoldAnyKeyUnlisted) {
  holders.Heard("b", Record({}), t0);
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0 + seconds(2)).has_value());
  const auto holder = holders.HolderOf("k", pool, "a", t0 + seconds(3));
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->node_id, "b");
  EXPECT_FALSE(holder->listed);
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0 + seconds(16)).has_value());
}

TEST_F(RunHoldersTest, ASilentNodeOfAnotherPoolOrTheAskingNodeHoldsNothingUnlisted) {
  holders.Heard("a", Record({}), t0);
  holders.Heard("entry", {{"running", nlohmann::json::array()}, {"pools", nlohmann::json::array()}},
                t0);
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0 + seconds(5)).has_value());
  EXPECT_FALSE(holders.HolderOf("k", "gpu-sm_90a-00000000", "x", t0 + seconds(5)).has_value());
}

TEST_F(RunHoldersTest, AListingHolderComesBeforeASilentOne) {
  holders.Heard("a", Record({}), t0);
  holders.Heard("b", Record({"k"}), t0 + seconds(4));
  const auto holder = holders.HolderOf("k", pool, "c", t0 + seconds(5));
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->node_id, "b");
  EXPECT_TRUE(holder->listed);
}

TEST_F(RunHoldersTest, RecordsOlderThanTheLeaseAreForgottenAsOthersAreHeard) {
  holders.Heard("b", Record({"k"}), t0);
  holders.Heard("c", Record({}), t0 + seconds(20));
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0).has_value());  // gone, not merely old
}

TEST_F(RunHoldersTest, MalformedRunningListsHoldNothing) {
  holders.Heard("b", {{"running", "k"}, {"pools", {kCpuPool}}}, t0);
  holders.Heard("c", {{"running", {1, nullptr, "k2"}}}, t0);
  EXPECT_FALSE(holders.HolderOf("k", pool, "a", t0).has_value());
  EXPECT_TRUE(holders.HolderOf("k2", pool, "a", t0).has_value());
}

}  // namespace
}  // namespace kc::cluster
