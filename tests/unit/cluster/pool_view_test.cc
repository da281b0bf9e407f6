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

}  // namespace
}  // namespace kc::cluster
