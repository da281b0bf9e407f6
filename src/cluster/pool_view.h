// PoolsOf: the cluster's pools, from its nodes' records (node_registry.h), for GET /health.
// A pool is what a request can be sent to: nodes of one kind (`cpu`, `gpu/sm_90a`) with the
// same toolchain versions. Nodes with other versions make another pool, never an error: a
// library is run only where the versions it was built against match (docs/cluster.md).
//
// Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "protocol/cuda_code.h"

namespace kc::cluster {

// `nodes`: records with "node_id" and "pools": [{"pool", "target", "versions",
// "request_capacity", "requests_in_progress", "requests_waiting"}]. Returns one entry per
// (pool, versions): {"pool", "target", "versions", "nodes": [node ids], and the three loads
// summed}, ordered by pool name, then by versions. Records without those fields are skipped.
nlohmann::json PoolsOf(const nlohmann::json& nodes);

// What a node has heard of the cluster (node_registry.h): made once at each write it hears and
// shared by its readers, so a request reads it without a copy.
struct ClusterView {
  nlohmann::json nodes = nlohmann::json::array();  // the live nodes' records, by node id
  nlohmann::json pools = nlohmann::json::array();  // PoolsOf(nodes)
};

// A pool's name in subjects and consumer names: its kind and arch, and a short hash of its
// versions ("cpu-1a2b3c4d", "gpu-sm_90a-5e6f7a8b"). `pool`: {"pool", "versions"}.
std::string PoolIdOf(const nlohmann::json& pool);

// What a program's GPU code can run on: the architecture its options name (options.gpu_arch),
// and the code its uploaded libraries carry (protocol/cuda_code.h).
struct GpuNeed {
  std::optional<int> arch;
  std::vector<protocol::CudaCode> code;
};

// Where a request goes (docs/cluster.md "Pools by capability"), from PoolsOf's list: a
// program that needs no GPU goes to a CPU pool where there is one, else to any pool. One that
// may touch a GPU goes to the architecture `need.arch` names; else, with several GPU
// architectures, to those its libraries' code runs on (SASS preferred to PTX the driver would
// compile); else to the cluster's only GPU architecture. Several left, or none, is refused
// (kInvalidArgument naming the pools). A cluster without GPUs runs it on CPUs, as a CPU server
// does. Among pools of one kind and arch, the one with `own_versions` (the entry node's
// toolchain) is preferred, then the one with the most seats. kUnavailable when no pool can run
// it.
StatusOr<std::string> ChoosePool(const nlohmann::json& pools, bool needs_gpu,
                                 const nlohmann::json& own_versions, const GpuNeed& need = {});

}  // namespace kc::cluster
