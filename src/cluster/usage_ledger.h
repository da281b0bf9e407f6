// UsageLedger: the GPU and CPU seconds each tenant used in each quota window, summed over the
// cluster's nodes in a JetStream key-value bucket (kcoral_usage), so a tenant's seconds budgets
// hold cluster-wide (docs/deploy.md "In a cluster"). One key per tenant and window
// ("<tenant>.w<window>"), a JSON object of two sums, updated by compare-and-set: two nodes
// charging at once both count. Windows are counted from the Unix epoch, so every node names
// the same one.
//
//   KC_ASSIGN_OR_RETURN(auto ledger, UsageLedger::Open(link, 2 * window));
//   ledger->Add("alice", window_index, {1.5, 0.2});
//
// Thread-safe (cnats is).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "cluster/cluster_types.h"
#include "cluster/nats_link.h"

namespace kc::cluster {

class UsageLedger {
 public:
  // `ttl`: how long a window's sums are kept (two windows is enough).
  static StatusOr<std::unique_ptr<UsageLedger>> Open(NatsLink& link, std::chrono::seconds ttl);

  Status Add(const std::string& tenant, int64_t window, const UsageSums& used);
  // Zeros for a window nobody charged yet.
  StatusOr<UsageSums> Sums(const std::string& tenant, int64_t window) const;

 private:
  explicit UsageLedger(kvStore* bucket) : bucket_(bucket) {}

  kvStore* bucket_;  // owned by the link
};

}  // namespace kc::cluster
