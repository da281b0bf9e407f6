#include "cluster/run_holders.h"

#include "cluster/pool_view.h"

namespace kc::cluster {

namespace {

// The strings of a JSON array, skipping anything else; none when it is not an array.
std::set<std::string> StringsOf(const nlohmann::json& array) {
  std::set<std::string> out;
  if (!array.is_array()) return out;
  for (const auto& item : array)
    if (item.is_string()) out.insert(item.get<std::string>());
  return out;
}

}  // namespace

void RunHolders::Heard(const std::string& node_id, const nlohmann::json& record,
                       Clock::time_point at) {
  if (auto it = nodes_.find(node_id); it != nodes_.end() && it->second.at > at) return;
  std::erase_if(nodes_, [&](const auto& node) { return at - node.second.at > lease_; });
  Held held{.running = StringsOf(record.value("running", nlohmann::json())), .at = at};
  for (const auto& pool : record.value("pools", nlohmann::json::array()))
    if (pool.is_object()) held.pools.insert(PoolIdOf(pool));
  nodes_[node_id] = std::move(held);
}

void RunHolders::Left(const std::string& node_id) {
  nodes_.erase(node_id);
}

std::optional<RunHolder> RunHolders::HolderOf(const std::string& key, const std::string& pool,
                                              const std::string& self,
                                              Clock::time_point now) const {
  std::optional<RunHolder> silent;
  for (const auto& [node_id, held] : nodes_) {
    if (now - held.at > lease_) continue;  // presumed dead: its runs are anyone's
    if (held.running.contains(key)) return RunHolder{node_id, held.at, /*listed=*/true};
    // Records are written a heartbeat apart: a run taken just before its node fell silent
    // (broker paused, network cut) is in no record that came out.
    if (!silent && node_id != self && now - held.at > silent_after_ && held.pools.contains(pool))
      silent = RunHolder{node_id, held.at, /*listed=*/false};
  }
  return silent;
}

nlohmann::json RunHolders::Describe(const std::string& key, Clock::time_point now) const {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& [node_id, held] : nodes_) {
    nodes.push_back(
        {{"node_id", node_id},
         {"age_ms", std::chrono::duration_cast<std::chrono::milliseconds>(now - held.at).count()},
         {"lists_key", held.running.contains(key)},
         {"pools", held.pools}});
  }
  return nodes;
}

}  // namespace kc::cluster
