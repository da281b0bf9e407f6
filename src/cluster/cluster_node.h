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
#include "cluster/pool_view.h"

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
  // "nodes": [records]}, as of the last heartbeat.
  nlohmann::json Describe() const;
  // The nodes' records and pools as of the last heartbeat.
  std::shared_ptr<const ClusterView> View() const;
  const std::string& node_id() const;
  const ClusterOptions& options() const;

  // --- as an entry node
  // The pool a program goes to (pool_view.h ChoosePool).
  StatusOr<std::string> ChoosePool(bool needs_gpu, const nlohmann::json& own_versions,
                                   const GpuNeed& need) const;
  // Binds `key` to the program and to `nonce`, the run this entry node queues under it
  // (outcome_store.h), unless the key is bound already.
  StatusOr<cluster::Claim> Claim(const std::string& key, const std::string& program_hash,
                                 const std::string& nonce);
  // Queues the run of `key` under `nonce` (empty: a key without a claim); queueing one nonce
  // again (a retry) queues nothing. Nobody is woken for it before Wake.
  Status Queue(const std::string& pool, const std::string& tenant, const std::string& key,
               const std::string& nonce, std::string_view payload);
  // Wakes an idle node of `pool` for a request of `tenant` just queued; `claim_nonce` (or
  // empty) says its claim is written and holds that nonce.
  void Wake(const std::string& pool, const std::string& tenant, const std::string& claim_nonce);
  StatusOr<std::optional<std::string>> Outcome(const std::string& key);
  // Calls `on_outcome` (on a NATS thread) when `key`'s outcome is announced.
  StatusOr<std::unique_ptr<Listening>> Await(const std::string& key,
                                             std::function<void(std::string)> on_outcome);

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
  // Announces an answer that is not kept (a 503, a 400) and releases the key's claim, so that
  // a retry runs anew.
  void AnswerOnce(const std::string& key, const std::string& record);
  // How many times a request may start before it is answered FAILED.
  int max_runs() const;

  // --- a tenant's seconds in a quota window, summed over the cluster (usage_ledger.h)
  Status AddUsage(const std::string& tenant, int64_t window, const UsageSums& used);
  StatusOr<UsageSums> Usage(const std::string& tenant, int64_t window) const;

  // --- control messages: "cancel" (the client hung up), "attach" (a client retried elsewhere)
  void Tell(const std::string& what, const std::string& key);
  StatusOr<std::unique_ptr<Listening>> Hear(const std::string& what,
                                            std::function<void(std::string)> on_key);

 private:
  struct Parts;
  explicit ClusterNode(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace kc::cluster
