#include "cluster/pool_view.h"

#include <map>
#include <string>
#include <utility>

namespace kc::cluster {

nlohmann::json PoolsOf(const nlohmann::json& nodes) {
  static constexpr const char* kLoads[] = {"request_capacity", "requests_in_progress",
                                           "requests_waiting"};
  std::map<std::pair<std::string, std::string>, nlohmann::json> pools;
  if (!nodes.is_array()) return nlohmann::json::array();
  for (const auto& node : nodes) {
    if (!node.is_object() || !node.contains("pools") || !node["pools"].is_array()) continue;
    const std::string node_id = node.value("node_id", "");
    for (const auto& pool : node["pools"]) {
      if (!pool.is_object() || !pool.contains("pool") || !pool["pool"].is_string()) continue;
      const nlohmann::json versions = pool.value("versions", nlohmann::json::object());
      auto& entry = pools[{pool["pool"].get<std::string>(), versions.dump()}];
      if (entry.is_null()) {
        entry = {{"pool", pool["pool"]},
                 {"target", pool.value("target", nlohmann::json::object())},
                 {"versions", versions},
                 {"nodes", nlohmann::json::array()}};
        for (const char* load : kLoads)
          entry[load] = 0;
      }
      entry["nodes"].push_back(node_id);
      for (const char* load : kLoads) {
        if (pool.contains(load) && pool[load].is_number_integer()) {
          entry[load] = entry[load].get<int64_t>() + pool[load].get<int64_t>();
        }
      }
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (auto& [key, entry] : pools)
    out.push_back(std::move(entry));
  return out;
}

}  // namespace kc::cluster
