// RunningKeys: the keys of the requests this node is about to run (reading the claim), running,
// or holds an unstored outcome of (docs/cluster.md "The run lease"). Its node's record lists them
// at every heartbeat, so the lease on a run costs no write of its own. A key is held by one run at
// a time: a second delivery of the same message here (JetStream redelivered it while the first
// still ran, or still stored its outcome) waits for that run's outcome instead of running it again.
//
// Thread-safe.
#pragma once

#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace kc::cluster {

class RunningKeys {
 public:
  // False, holding nothing, when a run here holds `key` already.
  bool Hold(const std::string& key) {
    std::lock_guard lock(mu_);
    return held_.insert(key).second;
  }
  void Release(const std::string& key) {
    std::lock_guard lock(mu_);
    held_.erase(key);
  }
  nlohmann::json List() const {
    std::lock_guard lock(mu_);
    nlohmann::json keys = nlohmann::json::array();
    for (const std::string& key : held_)
      keys.push_back(key);
    return keys;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> held_;  // mu_
};

}  // namespace kc::cluster
