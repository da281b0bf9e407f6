#include "cluster/pool_view.h"

#include <gtest/gtest.h>

namespace kc::cluster {
namespace {

nlohmann::json Node(const std::string& id, const std::string& pool, const std::string& torch,
                    int capacity, int running) {
  return {{"node_id", id},
          {"pools",
           {{{"pool", pool},
             {"target", {{"arch", pool == "cpu" ? "" : pool.substr(4)}}},
             {"versions", {{"torch", torch}}},
             {"request_capacity", capacity},
             {"requests_in_progress", running},
             {"requests_waiting", 0}}}}};
}

TEST(PoolsOf, NodesOfOneKindAndVersionsMakeOnePoolWithTheirLoadSummed) {
  const auto pools = PoolsOf({Node("b", "gpu/sm_90a", "2.9", 8, 3),
                              Node("a", "gpu/sm_90a", "2.9", 8, 1), Node("c", "cpu", "", 4, 0)});
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_EQ(pools[0]["pool"], "cpu");
  EXPECT_EQ(pools[1]["pool"], "gpu/sm_90a");
  EXPECT_EQ(pools[1]["nodes"], (nlohmann::json{"b", "a"}));
  EXPECT_EQ(pools[1]["request_capacity"], 16);
  EXPECT_EQ(pools[1]["requests_in_progress"], 4);
  EXPECT_EQ(pools[1]["target"]["arch"], "sm_90a");
}

TEST(PoolsOf, OtherToolchainVersionsAreAnotherPool) {
  const auto pools =
      PoolsOf({Node("a", "gpu/sm_90a", "2.9", 8, 0), Node("b", "gpu/sm_90a", "2.10", 8, 0)});
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_NE(pools[0]["versions"], pools[1]["versions"]);
}

TEST(PoolsOf, RecordsWithoutPoolsAreSkipped) {
  EXPECT_EQ(PoolsOf({{{"node_id", "x"}}, 5, {{"pools", {{{"no_name", 1}}}}}}).size(), 0u);
  EXPECT_EQ(PoolsOf(nlohmann::json::object()).size(), 0u);
}

TEST(ChoosePool, WorkWithoutAGpuGoesToTheCpuPoolAndGpuWorkToTheGpuPool) {
  const auto pools = PoolsOf({Node("a", "gpu/sm_90a", "2.9", 8, 0), Node("c", "cpu", "", 4, 0)});
  EXPECT_EQ(*ChoosePool(pools, false, {}), PoolIdOf(pools[0]));
  EXPECT_TRUE(ChoosePool(pools, false, {})->starts_with("cpu-"));
  EXPECT_TRUE(ChoosePool(pools, true, {})->starts_with("gpu-sm_90a-"));
}

TEST(ChoosePool, WorkWithoutAGpuMayGoToAGpuPoolWhenThereIsNoCpuPool) {
  const auto pools =
      PoolsOf({Node("a", "gpu/sm_90a", "2.9", 8, 0), Node("b", "gpu/sm_80", "2.9", 8, 0)});
  EXPECT_TRUE(ChoosePool(pools, false, {}).ok());
}

TEST(ChoosePool, SeveralGpuArchitecturesAreRefusedByName) {
  const auto pools =
      PoolsOf({Node("a", "gpu/sm_90a", "2.9", 8, 0), Node("b", "gpu/sm_80", "2.9", 8, 0)});
  auto chosen = ChoosePool(pools, true, {});
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(chosen.status().message().find("gpu-sm_80-"), std::string::npos);
  EXPECT_NE(chosen.status().message().find("gpu-sm_90a-"), std::string::npos);
}

TEST(ChoosePool, TheEntryNodesVersionsArePreferredThenTheMostSeats) {
  const auto pools =
      PoolsOf({Node("a", "gpu/sm_90a", "2.9", 8, 0), Node("b", "gpu/sm_90a", "2.10", 2, 0)});
  const std::string mine = *ChoosePool(pools, true, {{"torch", "2.10"}});
  EXPECT_EQ(mine, PoolIdOf({{"pool", "gpu/sm_90a"}, {"versions", {{"torch", "2.10"}}}}));
  EXPECT_EQ(*ChoosePool(pools, true, {{"torch", "other"}}),
            PoolIdOf({{"pool", "gpu/sm_90a"}, {"versions", {{"torch", "2.9"}}}}));
}

TEST(ChoosePool, AClusterWithoutGpusRunsEverythingOnCpus) {
  EXPECT_TRUE(ChoosePool(PoolsOf(nlohmann::json::array({Node("c", "cpu", "", 4, 0)})), true, {})
                  ->starts_with("cpu-"));
}

TEST(ChoosePool, NoPoolAtAllIsUnavailable) {
  auto chosen = ChoosePool(nlohmann::json::array(), false, {});
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), StatusCode::kUnavailable);
}

TEST(PoolIdOf, IsATokenNatsAccepts) {
  const std::string id = PoolIdOf({{"pool", "gpu/sm_90a"}, {"versions", {{"torch", "2.9"}}}});
  EXPECT_EQ(id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-"), std::string::npos);
}

}  // namespace
}  // namespace kc::cluster
