// NodeRegistry: who is in the cluster (docs/cluster.md "Joining"). Each node keeps a record of
// itself in the key-value bucket kcoral_nodes under its node id, written again at every
// heartbeat; the bucket forgets a key three heartbeats after its last write, so a node that
// dies leaves the view by itself, and one that stops takes itself out at once. Any node reads
// the whole view, which is what GET /health shows as `cluster.nodes`.
//
// A record: {"node_id", "url", "pools": [...], "started_at", "beat_unix_ms", ...}: whatever
// the node's `describe` returns, plus node_id and beat_unix_ms.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "cluster/nats_link.h"

namespace kc::cluster {

class NodeRegistry {
 public:
  static constexpr const char* kBucket = "kcoral_nodes";

  // Writes this node's record once (an error here means the node cannot join), then again
  // every `heartbeat` on a thread of its own. `describe` must be thread-safe.
  static StatusOr<std::unique_ptr<NodeRegistry>> Join(NatsLink& link, std::string node_id,
                                                      std::chrono::seconds heartbeat,
                                                      std::function<nlohmann::json()> describe);
  // Stops beating and deletes the record.
  ~NodeRegistry();
  NodeRegistry(const NodeRegistry&) = delete;
  NodeRegistry& operator=(const NodeRegistry&) = delete;

  // Every node's record, ordered by node id, each with "age_s" since its last beat (by this
  // node's clock).
  StatusOr<nlohmann::json> View() const;
  // The view as of the last heartbeat (read then, so that GET /health and routing never wait
  // on NATS); an empty list before the first.
  nlohmann::json Cached() const;
  const std::string& node_id() const { return node_id_; }

 private:
  NodeRegistry(kvStore* bucket, std::string node_id, std::chrono::seconds heartbeat,
               std::function<nlohmann::json()> describe);
  Status Beat();
  void Refresh();
  void BeatLoop();

  kvStore* const bucket_;
  const std::string node_id_;
  const std::chrono::seconds heartbeat_;
  const std::function<nlohmann::json()> describe_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // mu_
  mutable std::mutex view_mu_;
  nlohmann::json view_ = nlohmann::json::array();  // view_mu_
  std::thread beater_;
};

}  // namespace kc::cluster
