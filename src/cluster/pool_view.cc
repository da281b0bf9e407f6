#include "cluster/pool_view.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/sha256.h"

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
                 {"pool_id", PoolIdOf(pool)},
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

std::string PoolIdOf(const nlohmann::json& pool) {
  std::string name = pool.value("pool", "");
  for (char& c : name) {
    const bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    if (!plain) c = '-';  // "gpu/sm_90a": '/' is not allowed in a consumer's name
  }
  const std::string versions = pool.value("versions", nlohmann::json::object()).dump();
  return name + "-" + Sha256Hex(versions).substr(0, 8);
}

namespace {

// 90 for "gpu/sm_90a"; nullopt for a CPU pool.
std::optional<int> GpuArchOf(const nlohmann::json& pool) {
  const std::string name = pool.value("pool", "");
  if (!name.starts_with("gpu/")) return std::nullopt;
  return protocol::ArchNumberOf(std::string_view(name).substr(4));
}

// The GPU pools among `candidates` that `code` runs on, SASS first: PTX only where no SASS runs.
std::vector<const nlohmann::json*> RunnableBy(
    const std::vector<protocol::CudaCode>& code,
    const std::vector<const nlohmann::json*>& candidates) {
  for (const bool ptx : {false, true}) {
    std::vector<const nlohmann::json*> runnable;
    for (const auto* pool : candidates) {
      auto arch = GpuArchOf(*pool);
      if (arch && std::any_of(code.begin(), code.end(), [&](const protocol::CudaCode& c) {
            return c.ptx == ptx && protocol::RunsOn(c, *arch);
          })) {
        runnable.push_back(pool);
      }
    }
    if (!runnable.empty()) return runnable;
  }
  return {};
}

}  // namespace

StatusOr<std::string> ChoosePool(const nlohmann::json& pools, bool needs_gpu,
                                 const nlohmann::json& own_versions, const GpuNeed& need) {
  auto is_gpu = [](const nlohmann::json& pool) { return GpuArchOf(pool).has_value(); };
  // A named architecture is the client's choice, even for work that needs no GPU; a cluster
  // without GPUs runs everything else on CPUs, as a CPU server does.
  needs_gpu = need.arch || (needs_gpu && std::any_of(pools.begin(), pools.end(), is_gpu));
  std::vector<const nlohmann::json*> candidates;
  for (const auto& pool : pools) {
    if (needs_gpu && !is_gpu(pool)) continue;
    candidates.push_back(&pool);
  }
  if (!needs_gpu) {
    // A CPU pool keeps GPUs for the work that needs them.
    std::vector<const nlohmann::json*> cpu;
    for (const auto* pool : candidates)
      if (!is_gpu(*pool)) cpu.push_back(pool);
    if (!cpu.empty()) candidates = cpu;
  }
  std::string names;
  for (const auto& pool : pools)
    names += (names.empty() ? "" : ", ") + pool.value("pool_id", PoolIdOf(pool));
  if (need.arch) {
    std::erase_if(candidates, [&](const auto* pool) { return GpuArchOf(*pool) != need.arch; });
    if (candidates.empty()) {
      return InvalidArgumentError("options.gpu_arch: the cluster has no GPU pool of sm_" +
                                  std::to_string(*need.arch) +
                                  " (pools: " + (names.empty() ? "none" : names) + ")");
    }
  }
  if (candidates.empty()) {
    return UnavailableError(
        "no node of the cluster can run it now (pools: " + (names.empty() ? "none" : names) + ")");
  }
  auto kinds = [&] {
    std::set<std::string> out;
    for (const auto* pool : candidates)
      out.insert(pool->value("pool", ""));
    return out;
  };
  if (needs_gpu && !need.arch && kinds().size() > 1 && !need.code.empty()) {
    candidates = RunnableBy(need.code, candidates);
    if (candidates.empty()) {
      std::string code;
      for (const auto& c : need.code)
        code += (code.empty() ? "" : ", ") + protocol::NameOf(c);
      return InvalidArgumentError("the uploaded library carries GPU code for " + code +
                                  ", which no GPU pool of the cluster runs (pools: " + names + ")");
    }
  }
  if (needs_gpu && kinds().size() > 1) {
    return InvalidArgumentError(
        "the cluster has GPU pools of several architectures (" + names + ")" +
        (need.code.empty() ? "" : " that the uploaded library runs on") +
        "; name the one the program was built for in options.gpu_arch (\"sm_90a\")");
  }
  const nlohmann::json* best = candidates.front();
  auto rank = [&](const nlohmann::json* pool) {
    return std::make_pair(pool->value("versions", nlohmann::json::object()) == own_versions,
                          pool->value("request_capacity", int64_t{0}));
  };
  for (const auto* pool : candidates)
    if (rank(pool) > rank(best)) best = pool;
  return best->value("pool_id", PoolIdOf(*best));
}

}  // namespace kc::cluster
