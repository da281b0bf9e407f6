// EntrySide: what a node that takes a client's request asks of the cluster (docs/cluster.md
// "Routing work"): which pool, a key's claim, the queue, the stored outcome and the control
// messages. ClusterNode is the real one, on NATS; a test of the server's entry route fakes it
// in memory.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "cluster/cluster_types.h"
#include "cluster/pool_view.h"

namespace kc::cluster {

class EntrySide {
 public:
  virtual ~EntrySide() = default;

  virtual const std::string& node_id() const = 0;
  // The pool a program goes to (pool_view.h ChoosePool).
  virtual StatusOr<std::string> ChoosePool(bool needs_gpu, const nlohmann::json& own_versions,
                                           const GpuNeed& need) const = 0;
  // Binds `key` to the program and to `nonce`, the run this entry node queues under it
  // (outcome_store.h), unless the key is bound already.
  virtual StatusOr<cluster::Claim> Claim(const std::string& key, const std::string& program_hash,
                                         const std::string& nonce) = 0;
  // Queues the run of `key` under `nonce` (empty: a key without a claim); queueing one nonce
  // again (a retry) queues nothing. Nobody is woken for it before Wake.
  virtual Status Queue(const std::string& pool, const std::string& tenant, const std::string& key,
                       const std::string& nonce, std::string_view payload) = 0;
  // Wakes an idle node of `pool` for a request of `tenant` just queued; `claim_nonce` (or
  // empty) says its claim is written and holds that nonce.
  virtual void Wake(const std::string& pool, const std::string& tenant,
                    const std::string& claim_nonce) = 0;
  virtual StatusOr<std::optional<std::string>> Outcome(const std::string& key) = 0;
  // The same as the outcome bucket's leader has it (Outcome may ask a replica that lags).
  virtual StatusOr<std::optional<std::string>> StoredOutcome(const std::string& key) = 0;
  // Since when this node's writes to the cluster (its heartbeats) have failed: NATS away, or
  // its servers without a quorum. nullopt while they succeed.
  virtual std::optional<std::chrono::steady_clock::time_point> WritesFailingSince() const = 0;
  // Calls `on_outcome` (on a thread of the cluster's) when `key`'s outcome is announced.
  virtual StatusOr<std::unique_ptr<Listening>> Await(
      const std::string& key, std::function<void(std::string)> on_outcome) = 0;
  // Control messages: "cancel" (the client hung up), "attach" (a client retried elsewhere).
  virtual void Tell(const std::string& what, const std::string& key) = 0;
  virtual StatusOr<std::unique_ptr<Listening>> Hear(const std::string& what,
                                                    std::function<void(std::string)> on_key) = 0;
};

}  // namespace kc::cluster
