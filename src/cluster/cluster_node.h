// ClusterNode: this server as a node of a KCoral cluster (docs/cluster.md). For now it joins:
// it connects to the NATS servers, announces itself in the node registry and reads the
// cluster's view for GET /health. Work routing comes next (issue 26).
//
// Built with or without the NATS client (libnats-dev): without it, Join says so and the
// server refuses --cluster; nothing else in the server changes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "cluster/cluster_options.h"

namespace kc::cluster {

class ClusterNode {
 public:
  // `describe` gives this node's record (url, pools, load), called at every heartbeat from a
  // thread of the node's own: it must be thread-safe.
  static StatusOr<std::unique_ptr<ClusterNode>> Join(const ClusterOptions& options,
                                                     std::string node_id,
                                                     std::function<nlohmann::json()> describe);
  ~ClusterNode();  // leaves: its record is deleted, the connection closed

  // For /health: {"servers", "connected_url", "connected", "node_id", "pools": [PoolsOf],
  // "nodes": [records]}.
  nlohmann::json Describe() const;

 private:
  struct Parts;
  explicit ClusterNode(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace kc::cluster
