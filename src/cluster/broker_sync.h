// BrokerSync: whether the cluster's NATS servers sync a write to disk before they acknowledge
// it (docs/cluster.md "Why the brokers sync"). Our two promises (an outcome is stored before
// its request is acknowledged; a retry never runs a program twice) rest on JetStream keeping
// what it acknowledged, and by default JetStream acknowledges at once and syncs every two
// minutes: a power loss of the brokers loses acknowledged writes (Jepsen, NATS 2.12.1).
//
// A NATS client cannot see a server's settings, so each server's monitoring endpoint
// (--cluster-nats-monitor, its /varz) is asked for `jetstream.config.sync_always`, at start and
// then every `every` on a thread of its own. Unless the operator accepted lazy brokers
// (--cluster-allow-lazy-fsync), a broker that does not sync, one older than 2.10.23, one that
// cannot be asked, or no endpoint at all is a warning: in /health (`cluster.broker_sync`), on the
// dashboard, and in the log through `on_warning` (called when the warning appears or changes).
//
//   BrokerSync sync({"http://127.0.0.1:8222"}, false, 60s, [&](const json& r) { Log(r); });
//   sync.Report();  // {"state": "synced", "warning": false, "message": ..., "brokers": [...]}
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc::cluster {

class BrokerSync {
 public:
  using OnWarning = std::function<void(const nlohmann::json& report)>;
  BrokerSync(std::vector<std::string> monitors, bool allow_lazy, std::chrono::seconds every,
             OnWarning on_warning);
  ~BrokerSync();
  BrokerSync(const BrokerSync&) = delete;
  BrokerSync& operator=(const BrokerSync&) = delete;

  // As of the last check (the first is made before the constructor returns).
  nlohmann::json Report() const;

  // What one server's /varz says: {"monitor", "sync_always", "version"} or {"monitor", "error"}.
  static nlohmann::json AskBroker(const std::string& monitor);
  // The report for these answers (AskBroker's), with no endpoint given or lazy brokers allowed.
  static nlohmann::json Judge(const nlohmann::json& brokers, bool allow_lazy);

 private:
  void Check();
  void CheckLoop();

  const std::vector<std::string> monitors_;
  const bool allow_lazy_;
  const std::chrono::seconds every_;
  const OnWarning on_warning_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;                             // mu_
  nlohmann::json report_ = nlohmann::json::object();  // mu_
  std::thread checker_;                               // started last: uses the members above
};

}  // namespace kc::cluster
