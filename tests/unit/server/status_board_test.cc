#include "server/status/status_board.h"

#include <gtest/gtest.h>

namespace kc::server {
namespace {

using std::chrono::milliseconds;

RenderedRequest Request(const std::string& id, const std::string& tenant) {
  return {tenant, std::make_shared<const std::string>(
                      nlohmann::json{{"request_id", id}, {"tenant", tenant}}.dump())};
}

StatusBoard::Snapshot Status(int build) {
  return {
      {{"build", build}, {"queue", {{"waiting", 2}, {"by_tenant", {{"alice", 1}, {"bob", 1}}}}}},
      {Request("a1", "alice"), Request("b1", "bob")}};
}

struct Fixture {
  int calls = 0;
  StatusBoard board{[this] { return Status(++calls); }};
};

TEST(StatusBoard, BuildsAtMostOncePerMaxAgeForAllViewers) {
  Fixture f;
  const auto t0 = Clock::now();
  const Caller alice{"alice", Role::kTenant}, ops{"ops", Role::kOperator};
  for (int viewer = 0; viewer < 64; ++viewer) {
    f.board.View(std::nullopt, t0 + milliseconds(viewer));
    f.board.View(alice, t0 + milliseconds(viewer));
    f.board.View(ops, t0 + milliseconds(viewer));
  }
  EXPECT_EQ(f.calls, 1);
  EXPECT_EQ(f.board.builds(), 1u);
  f.board.View(std::nullopt, t0 + milliseconds(1000));
  EXPECT_EQ(f.calls, 2);
  EXPECT_EQ(
      nlohmann::json::parse(*f.board.View(std::nullopt, t0 + milliseconds(1500)).text)["build"], 2);
}

TEST(StatusBoard, ViewersOfOneKindShareOneText) {
  Fixture f;
  const auto t0 = Clock::now();
  auto first = f.board.View(std::nullopt, t0);
  auto second = f.board.View(std::nullopt, t0 + milliseconds(10));
  EXPECT_EQ(first.text.get(), second.text.get());
  EXPECT_EQ(second.age, milliseconds(10));
}

TEST(StatusBoard, ATenantSeesOnlyItsOwnRequestsAndQueue) {
  Fixture f;
  const auto view =
      nlohmann::json::parse(*f.board.View(Caller{"alice", Role::kTenant}, Clock::now()).text);
  ASSERT_EQ(view["requests"].size(), 1u);
  EXPECT_EQ(view["requests"][0]["request_id"], "a1");
  EXPECT_EQ(view["queue"]["by_tenant"], nlohmann::json({{"alice", 1}}));
  EXPECT_EQ(view["queue"]["waiting"], 2);  // the pool's totals are the service's, not a tenant's
  EXPECT_EQ(view["viewer"]["role"], "tenant");
  EXPECT_EQ(view["viewer"]["tenant"], "alice");
}

TEST(StatusBoard, AnOperatorAndAServerWithoutKeysSeeEverything) {
  Fixture f;
  const auto now = Clock::now();
  for (const auto& viewer :
       {std::optional<Caller>(), std::optional<Caller>(Caller{"ops", Role::kOperator})}) {
    const auto view = nlohmann::json::parse(*f.board.View(viewer, now).text);
    ASSERT_EQ(view["requests"].size(), 2u);
    EXPECT_EQ(view["requests"][1]["request_id"], "b1");  // oldest first, as the ring keeps them
    EXPECT_EQ(view["queue"]["by_tenant"].size(), 2u);
    EXPECT_EQ(view["viewer"]["role"], std::string(viewer ? "operator" : "open"));
  }
}

TEST(StatusBoard, NoRequestsMakeAnEmptyArray) {
  StatusBoard board{[] { return StatusBoard::Snapshot{{{"build", 1}}}; }};
  const auto view =
      nlohmann::json::parse(*board.View(Caller{"alice", Role::kTenant}, Clock::now()).text);
  EXPECT_EQ(view["requests"], nlohmann::json::array());
  EXPECT_EQ(view["build"], 1);
}

TEST(StatusBoard, CountsItsBuildsInTheStatus) {
  Fixture f;
  const auto t0 = Clock::now();
  f.board.View(std::nullopt, t0);
  const auto view =
      nlohmann::json::parse(*f.board.View(std::nullopt, t0 + milliseconds(2000)).text);
  EXPECT_EQ(view["snapshot_builds"], 2);
}

TEST(StatusBoard, ReadyOnlyWhenNeitherABuildNorACutIsDue) {
  Fixture f;
  const auto t0 = Clock::now();
  const Caller alice{"alice", Role::kTenant};
  EXPECT_FALSE(f.board.Ready(std::nullopt, t0));  // nothing built yet
  const auto built = f.board.View(std::nullopt, t0);
  const auto ready = f.board.Ready(std::nullopt, t0 + milliseconds(300));
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->text.get(), built.text.get());
  EXPECT_EQ(ready->age, milliseconds(300));
  EXPECT_FALSE(f.board.Ready(alice, t0 + milliseconds(300)));  // alice's cut is not made yet
  EXPECT_FALSE(f.board.Ready(std::nullopt, t0 + milliseconds(1000)));  // a build is due
  EXPECT_EQ(f.calls, 1);
}

}  // namespace
}  // namespace kc::server
