#include "cluster/broker_sync.h"

#include <gtest/gtest.h>

namespace kc::cluster {
namespace {

nlohmann::json Synced(const std::string& monitor, bool sync_always) {
  return {{"monitor", monitor}, {"sync_always", sync_always}, {"version", "2.15.1"}};
}

TEST(BrokerSyncJudge, EveryBrokerSyncedIsNoWarning) {
  const auto report =
      BrokerSync::Judge({Synced("http://a:8222", true), Synced("http://b:8222", true)}, false);
  EXPECT_EQ(report["state"], "synced");
  EXPECT_FALSE(report["warning"]);
}

TEST(BrokerSyncJudge, OneLazyBrokerIsAWarningNamingItAndTheSetting) {
  const auto report =
      BrokerSync::Judge({Synced("http://a:8222", true), Synced("http://b:8222", false)}, false);
  EXPECT_EQ(report["state"], "lazy");
  EXPECT_TRUE(report["warning"]);
  const std::string message = report["message"];
  EXPECT_NE(message.find("http://b:8222"), std::string::npos) << message;
  EXPECT_EQ(message.find("http://a:8222"), std::string::npos) << message;
  EXPECT_NE(message.find("sync_interval: always"), std::string::npos) << message;
}

TEST(BrokerSyncJudge, ALazyBrokerOutranksOneThatCannotBeAsked) {
  const nlohmann::json away = {{"monitor", "http://c:8222"}, {"error", "Connection refused"}};
  EXPECT_EQ(BrokerSync::Judge({away, Synced("http://b:8222", false)}, false)["state"], "lazy");
  const auto unknown = BrokerSync::Judge({away, Synced("http://b:8222", true)}, false);
  EXPECT_EQ(unknown["state"], "unknown");
  EXPECT_TRUE(unknown["warning"]);
  EXPECT_NE(unknown["message"].get<std::string>().find("http://c:8222: Connection refused"),
            std::string::npos);
}

TEST(BrokerSyncJudge, ABrokerOlderThan2_10_23IsAWarningNamingItsVersion) {
  nlohmann::json old = Synced("http://b:8222", true);
  old["version"] = "2.10.22";
  const auto report = BrokerSync::Judge({Synced("http://a:8222", true), old}, false);
  EXPECT_EQ(report["state"], "old");
  EXPECT_NE(report["message"].get<std::string>().find("http://b:8222 (2.10.22)"),
            std::string::npos);
}

TEST(BrokerSyncJudge, NoEndpointIsAWarningThatSaysHowToCheck) {
  const auto report = BrokerSync::Judge(nlohmann::json::array(), false);
  EXPECT_EQ(report["state"], "unchecked");
  EXPECT_TRUE(report["warning"]);
  EXPECT_NE(report["message"].get<std::string>().find("--cluster-nats-monitor"), std::string::npos);
}

TEST(BrokerSyncJudge, AllowedLazyBrokersAreNoWarningButSayTheCost) {
  const auto report = BrokerSync::Judge(nlohmann::json::array(), true);
  EXPECT_EQ(report["state"], "lazy_allowed");
  EXPECT_FALSE(report["warning"]);
  EXPECT_NE(report["message"].get<std::string>().find("power"), std::string::npos);
}

TEST(BrokerSyncAsk, AnEndpointThatIsNotHttpIsAnErrorNotACheck) {
  const auto answer = BrokerSync::AskBroker("nats://127.0.0.1:4222");
  EXPECT_FALSE(answer.contains("sync_always"));
  EXPECT_NE(answer.value("error", "").find("not an http:// URL"), std::string::npos) << answer;
}

TEST(BrokerSyncAsk, TheFirstCheckIsMadeAndToldBeforeTheConstructorReturns) {
  int told = 0;
  BrokerSync sync({}, false, std::chrono::seconds(60), [&](const nlohmann::json&) { ++told; });
  EXPECT_EQ(told, 1);
  EXPECT_EQ(sync.Report()["state"], "unchecked");
}

}  // namespace
}  // namespace kc::cluster
