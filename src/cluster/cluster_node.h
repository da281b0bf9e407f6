// ClusterNode: this server as a node of a KCoral cluster (docs/cluster.md): its connection to
// the NATS servers, its record in the node registry, the work queue, the outcome store and the
// control messages, behind one face that carries no NATS type.
//
// Built with or without the NATS client (libnats-dev): without it, Join says so and the
// server refuses --cluster; nothing else in the server changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "cluster/cluster_options.h"
#include "cluster/cluster_types.h"
#include "cluster/entry_side.h"
#include "cluster/pool_view.h"
#include "cluster/run_holders.h"

namespace kc::cluster {

class ClusterNode : public EntrySide {
 public:
  // `describe` gives this node's record (url, pools, load), called at every heartbeat from a
  // thread of the node's own: it must be thread-safe. `on_broker_warning` hears, from a thread
  // of its own, when the brokers are found not to sync before they acknowledge (broker_sync.h).
  using BrokerWarning = std::function<void(const nlohmann::json& report)>;
  static StatusOr<std::unique_ptr<ClusterNode>> Join(const ClusterOptions& options,
                                                     std::string node_id,
                                                     std::function<nlohmann::json()> describe,
                                                     BrokerWarning on_broker_warning);
  ~ClusterNode() override;  // leaves: its record is deleted, the connection closed

  // For /health: {"servers", "connected_url", "connected", "node_id", "broker_sync" (its
  // report, broker_sync.h), "pools": [PoolsOf], "nodes": [records]}, as of the last heartbeat.
  nlohmann::json Describe() const;
  // The nodes' records and pools as of the last heartbeat.
  std::shared_ptr<const ClusterView> View() const;
  const std::string& node_id() const override;
  const ClusterOptions& options() const;

  // --- as an entry node (entry_side.h)
  StatusOr<std::string> ChoosePool(bool needs_gpu, const nlohmann::json& own_versions,
                                   const GpuNeed& need) const override;
  StatusOr<cluster::Claim> Claim(const std::string& key, const std::string& program_hash,
                                 const std::string& nonce) override;
  Status Queue(const std::string& pool, const std::string& tenant, const std::string& key,
               const std::string& nonce, std::string_view payload) override;
  void Wake(const std::string& pool, const std::string& tenant,
            const std::string& claim_nonce) override;
  StatusOr<std::optional<std::string>> Outcome(const std::string& key) override;
  std::optional<std::chrono::steady_clock::time_point> WritesFailingSince() const override;
  StatusOr<std::unique_ptr<Listening>> Await(const std::string& key,
                                             std::function<void(std::string)> on_outcome) override;

  // --- as an executing node
  // Starts pulling requests of `pool`.
  Status Serve(const std::string& pool);
  // The next one, from the tenant of lowest `rank` that has one (work_queue.h), waiting up to
  // `wait`; null when none came.
  StatusOr<std::unique_ptr<WorkItem>> NextWork(
      std::chrono::milliseconds wait, const std::function<double(const std::string&)>& rank);
  // The nonce of `key`'s claim, if it has one: a message is run only under its own claim.
  StatusOr<std::optional<std::string>> ClaimNonce(const std::string& key);
  // True, once, when a wake this node heard confirmed the claim of `nonce` (no read needed),
  // waiting up to `wait` for that wake.
  bool TakeConfirmedClaim(const std::string& nonce, std::chrono::microseconds wait);
  // Stores and announces `key`'s outcome unless one is there: true when this one is the answer.
  StatusOr<bool> StoreOutcome(const std::string& key, const std::string& record);
  // `key`'s stored outcome as the outcome bucket's leader has it (Outcome may ask a replica
  // that lags): what decides whether a redelivered request runs again.
  StatusOr<std::optional<std::string>> StoredOutcome(const std::string& key) override;
  // Announces an answer that is not kept (a 503, a 400) and releases the key's claim, so that
  // a retry runs anew.
  void AnswerOnce(const std::string& key, const std::string& record);
  // How many times a request may start before it is answered FAILED.
  int max_runs() const;
  // This node's record lists `key` as running (run_holders.h) from its next heartbeat, until
  // ReleaseRun. False, holding nothing, when a run here holds it already (running_keys.h).
  bool HoldRun(const std::string& key);
  void ReleaseRun(const std::string& key);
  // Another node's (or this one's) hold on `key`'s run of `pool`, within the run lease.
  std::optional<RunHolder> HolderOf(const std::string& key, const std::string& pool) const;
  // The records HolderOf weighs (RunHolders::Describe).
  nlohmann::json DescribeHolders(const std::string& key) const;

  // --- a tenant's seconds in a quota window, summed over the cluster (usage_ledger.h)
  Status AddUsage(const std::string& tenant, int64_t window, const UsageSums& used);
  StatusOr<UsageSums> Usage(const std::string& tenant, int64_t window) const;

  // --- control messages (entry_side.h); an executing node hears "cancel" too
  void Tell(const std::string& what, const std::string& key) override;
  StatusOr<std::unique_ptr<Listening>> Hear(const std::string& what,
                                            std::function<void(std::string)> on_key) override;

 private:
  struct Parts;
  explicit ClusterNode(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace kc::cluster
