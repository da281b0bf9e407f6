// PoolsOf: the cluster's pools, from its nodes' records (node_registry.h), for GET /health.
// A pool is what a request can be sent to: nodes of one kind (`cpu`, `gpu/sm_90a`) with the
// same toolchain versions. Nodes with other versions make another pool, never an error: a
// library is run only where the versions it was built against match (docs/cluster.md).
//
// Pure.
#pragma once

#include <nlohmann/json.hpp>

namespace kc::cluster {

// `nodes`: records with "node_id" and "pools": [{"pool", "target", "versions",
// "request_capacity", "requests_in_progress", "requests_waiting"}]. Returns one entry per
// (pool, versions): {"pool", "target", "versions", "nodes": [node ids], and the three loads
// summed}, ordered by pool name, then by versions. Records without those fields are skipped.
nlohmann::json PoolsOf(const nlohmann::json& nodes);

}  // namespace kc::cluster
