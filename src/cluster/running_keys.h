// RunningKeys: the keys of the requests this node is running, or holds an unstored outcome of
// (docs/cluster.md "The run lease"). Its node's record lists them at every heartbeat, so the
// lease on a run costs no write of its own. A key may be held twice at once (a redelivery
// of a request whose first run here is still storing): it is listed until both let go.
//
// Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace kc::cluster {

class RunningKeys {
 public:
  void Hold(const std::string& key) {
    std::lock_guard lock(mu_);
    ++held_[key];
  }
  void Release(const std::string& key) {
    std::lock_guard lock(mu_);
    if (auto it = held_.find(key); it != held_.end() && --it->second == 0) held_.erase(it);
  }
  nlohmann::json List() const {
    std::lock_guard lock(mu_);
    nlohmann::json keys = nlohmann::json::array();
    for (const auto& [key, count] : held_)
      keys.push_back(key);
    return keys;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> held_;  // mu_: key -> how many runs hold it
};

}  // namespace kc::cluster
