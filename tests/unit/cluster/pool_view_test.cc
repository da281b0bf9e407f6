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

// Three GPU architectures, tested as the issue allows: records of CPU-less "nodes" that
// advertise them (one H200 here).
nlohmann::json ThreeArchitectures() {
  return PoolsOf({Node("h", "gpu/sm_90a", "2.9", 8, 0), Node("a", "gpu/sm_80", "2.9", 8, 0),
                  Node("b", "gpu/sm_100a", "2.9", 8, 0), Node("c", "cpu", "", 4, 0)});
}

TEST(ChoosePool, OptionsGpuArchPicksItsPoolAndAnArchWithoutOneIsRefusedNamingThePools) {
  const auto pools = ThreeArchitectures();
  EXPECT_TRUE(ChoosePool(pools, true, {}, {.arch = 80})->starts_with("gpu-sm_80-"));
  EXPECT_TRUE(ChoosePool(pools, true, {}, {.arch = 90})->starts_with("gpu-sm_90a-"));
  auto missing = ChoosePool(pools, true, {}, {.arch = 120});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      missing.status().message().find("options.gpu_arch: the cluster has no GPU pool of sm_120"),
      std::string::npos);
  EXPECT_NE(missing.status().message().find("gpu-sm_100a-"), std::string::npos);
  // Named, it is the client's choice even for work that needs no GPU; without GPUs, refused.
  EXPECT_TRUE(ChoosePool(pools, false, {}, {.arch = 80})->starts_with("gpu-sm_80-"));
  auto no_gpus = ChoosePool(PoolsOf(nlohmann::json::array({Node("c", "cpu", "", 4, 0)})), true, {},
                            {.arch = 90});
  ASSERT_FALSE(no_gpus.ok());
  EXPECT_EQ(no_gpus.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_gpus.status().message().find("cpu-"), std::string::npos);
}

TEST(ChoosePool, ALibrarysCodePicksThePoolItRunsOnSassBeforePtx) {
  using protocol::CudaCode;
  const auto pools = ThreeArchitectures();
  const CudaCode sm90a{90, 'a', false}, sm80{80, 0, false}, ptx80{80, 0, true},
      sm120{120, 0, false};
  EXPECT_TRUE(ChoosePool(pools, true, {}, {.code = {sm90a}})->starts_with("gpu-sm_90a-"));
  // SASS for sm_80 and PTX that would also JIT on sm_90a and sm_100a: the SASS decides.
  EXPECT_TRUE(ChoosePool(pools, true, {}, {.code = {ptx80, sm80}})->starts_with("gpu-sm_80-"));
  // Runs on two of them: the client must say which.
  auto both = ChoosePool(pools, true, {}, {.code = {sm90a, sm80}});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("options.gpu_arch"), std::string::npos);
  // Runs on none: the code and the pools are named.
  auto none = ChoosePool(pools, true, {}, {.code = {sm120}});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("sm_120"), std::string::npos);
  EXPECT_NE(none.status().message().find("gpu-sm_80-"), std::string::npos);
  // With one GPU architecture the library is not read: that one runs it, as a server would.
  const auto one = PoolsOf(nlohmann::json::array({Node("h", "gpu/sm_90a", "2.9", 8, 0)}));
  EXPECT_TRUE(ChoosePool(one, true, {}, {.code = {sm120}})->starts_with("gpu-sm_90a-"));
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
