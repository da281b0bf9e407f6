// OutcomeStore: where a request's answer is kept once, for whoever asks (docs/cluster.md "One
// answer"). Two JetStream key-value buckets under the request's key:
//   kcoral_claims    key -> the hash of the program (and options) first sent under it, so a
//                    retry with the key is recognised, and another program under it is refused,
//                    and the nonce of the one run queued under it;
//   kcoral_outcomes  key -> the outcome record, written once ("create"): a redelivered run
//                    whose outcome is already there drops its own.
// When an outcome is stored it is also announced on kcoral.outcome.<key>, where the entry node
// (and any node a client retried on) waits for it: by the NATS servers as they store it
// (JetStream's republish), or, for a bucket made without that, by the node that stored it.
//
// A key is "k-" + sha256 of the client's Idempotency-Key, or "r-" + random hex: characters
// valid in both a key-value key and a subject token.
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "cluster/cluster_types.h"
#include "cluster/nats_link.h"

namespace kc::cluster {

// A live subscription; ends when destroyed, and keeps what its callback uses until then.
class Subscription : public Listening {
 public:
  Subscription(natsSubscription* subscription, std::shared_ptr<void> keep)
      : subscription_(subscription), keep_(std::move(keep)) {}
  ~Subscription() override;
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  natsSubscription* subscription_;
  std::shared_ptr<void> keep_;  // released after the destructor's body has drained
};

class OutcomeStore {
 public:
  // `ttl`: how long a key and its outcome are remembered.
  static StatusOr<std::unique_ptr<OutcomeStore>> Open(NatsLink& link, std::chrono::seconds ttl);

  // Binds `key` to `program_hash` and `nonce` unless it is bound already; says which, with the
  // nonce of the claim that holds it.
  StatusOr<cluster::Claim> Claim(const std::string& key, const std::string& program_hash,
                                 const std::string& nonce);
  // The nonce of `key`'s claim, if it has one.
  StatusOr<std::optional<std::string>> ClaimNonce(const std::string& key);
  // Forgets `key`'s claim: its answer was not kept (a 503, a 400), so a retry runs anew.
  void Release(const std::string& key);
  // Stores and announces `record` unless an outcome is there already: true when this one is
  // the answer.
  StatusOr<bool> Put(const std::string& key, const std::string& record);
  // The stored outcome, if any. Any replica answers (a direct get): one that lags may not
  // have it yet.
  StatusOr<std::optional<std::string>> Get(const std::string& key);
  // The same, asked of the bucket's leader, which has every outcome acknowledged: for deciding
  // whether to run a redelivered request, where a lagging replica's "none" runs it twice.
  StatusOr<std::optional<std::string>> GetFromLeader(const std::string& key);

  // Announces an outcome to the nodes waiting for it.
  void Announce(const std::string& key, const std::string& record);
  // Calls `on_outcome` (on a NATS thread) with each announcement of `key`'s outcome.
  StatusOr<std::unique_ptr<Subscription>> Await(const std::string& key,
                                                std::function<void(std::string)> on_outcome);

  // Control messages about `key` (kcoral.<what>.<key>): "cancel" from an entry node whose
  // client hung up, "attach" from a node a client retried on.
  void Tell(const std::string& what, const std::string& key);
  // Calls `on_key` with the key of every `what` message of any key.
  StatusOr<std::unique_ptr<Subscription>> Hear(const std::string& what,
                                               std::function<void(std::string)> on_key);

 private:
  OutcomeStore(NatsLink& link, kvStore* claims, kvStore* outcomes, bool servers_announce)
      : link_(link), claims_(claims), outcomes_(outcomes), servers_announce_(servers_announce) {}

  NatsLink& link_;
  kvStore* const claims_;
  kvStore* const outcomes_;
  const bool servers_announce_;  // the outcomes bucket republishes what it stores
};

}  // namespace kc::cluster
