// NodeRegistry: who is in the cluster (docs/cluster.md "Joining"). Each node keeps a record of
// itself in the key-value bucket kcoral_nodes under its node id, written again at every
// heartbeat; the bucket forgets a key three heartbeats after its last write. Each node watches
// the bucket (one JetStream consumer that pushes every write, for the node's whole life) and
// keeps the records it heard: one not written again for three heartbeats, or deleted (a node
// that stops takes itself out at once), leaves the view. GET /health shows it as
// `cluster.nodes`. (Reading the bucket whole at each heartbeat cost a consumer and a get per
// node each time: bench/cluster_background.py.)
//
// A record: {"node_id", "url", "pools": [...], "started_at", "running", "beat_unix_ms", ...}:
// whatever the node's `describe` returns, plus node_id and beat_unix_ms. The last record of
// every node heard is kept for the run lease, a node that left the view included
// (run_holders.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "cluster/nats_link.h"
#include "cluster/pool_view.h"
#include "cluster/run_holders.h"

namespace kc::cluster {

class NodeRegistry {
 public:
  static constexpr const char* kBucket = "kcoral_nodes";

  // Writes this node's record once (an error here means the node cannot join), then again
  // every `heartbeat` on a thread of its own. `describe` must be thread-safe. A silent node's
  // last record is believed for `run_lease`.
  static StatusOr<std::unique_ptr<NodeRegistry>> Join(NatsLink& link, std::string node_id,
                                                      std::chrono::seconds heartbeat,
                                                      std::chrono::seconds run_lease,
                                                      std::function<nlohmann::json()> describe);
  // Stops beating and deletes the record.
  ~NodeRegistry();
  NodeRegistry(const NodeRegistry&) = delete;
  NodeRegistry& operator=(const NodeRegistry&) = delete;

  // Every live node's record, ordered by node id, each with "age_s" since this node heard its
  // last beat, and their pools. Kept as the watch hears writes, so GET /health and routing
  // never wait on NATS.
  std::shared_ptr<const ClusterView> Cached() const;
  const std::string& node_id() const { return node_id_; }
  // Since when this node's beats have failed to be written; nullopt while they are written.
  std::optional<std::chrono::steady_clock::time_point> BeatsFailingSince() const;
  // The node holding `key`'s run of `pool` (RunHolders::HolderOf), this one included; an
  // unknown holder (empty node id) while this node has not heard its own beat for two heartbeats.
  std::optional<RunHolder> HolderOf(const std::string& key, const std::string& pool) const;
  // RunHolders::Describe, as of now.
  nlohmann::json DescribeHolders(const std::string& key) const;

 private:
  NodeRegistry(kvStore* bucket, std::string node_id, std::chrono::seconds heartbeat,
               std::chrono::seconds run_lease, std::function<nlohmann::json()> describe);
  Status Beat();
  void BeatLoop();
  // Hears the bucket's writes until stopped. A watch that broke, or that no longer hears this
  // node's own beats (BeatLoop), is made again.
  void WatchLoop();
  void Heard(kvEntry* entry);
  // view_ from heard_, forgetting the records silent for three heartbeats; view_mu_ held.
  void RebuildView();

  kvStore* const bucket_;
  const std::string node_id_;
  const std::chrono::seconds heartbeat_;
  const std::function<nlohmann::json()> describe_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // mu_
  // The steady clock's count when beats began to fail; 0 while they are written.
  std::atomic<std::chrono::steady_clock::rep> beats_failing_since_{0};
  kvWatcher* watcher_ = nullptr;  // made in Join, stopped by the destructor
  std::thread watching_;
  mutable std::mutex view_mu_;
  struct HeardRecord {
    nlohmann::json record;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, HeardRecord> heard_;          // by node id; view_mu_
  RunHolders holders_;                                // view_mu_
  std::chrono::steady_clock::time_point heard_self_;  // this node's last beat heard; view_mu_
  std::shared_ptr<const ClusterView> view_ = std::make_shared<ClusterView>();  // view_mu_
  std::thread beater_;
};

}  // namespace kc::cluster
