// What the rest of the server sees of the cluster's plumbing, free of NATS types, so that a
// server built without the NATS client compiles the same code (cluster_node.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kc::cluster {

// A subscription; it ends when this is destroyed.
class Listening {
 public:
  virtual ~Listening() = default;
};

// One request pulled from the cluster's work queue (work_queue.h).
class WorkItem {
 public:
  virtual ~WorkItem() = default;
  virtual std::string_view data() const = 0;
  virtual std::string tenant() const = 0;  // its tenant's token (work_message.h TenantSubjectToken)
  virtual uint64_t delivered() const = 0;  // 1 for the first delivery
  virtual void InProgress() = 0;           // still on it
  virtual Status Ack() = 0;                // the outcome is safe
  virtual void GiveBack() = 0;             // for another node, now
};

enum class ClaimResult { kNew, kSameProgram, kOtherProgram };

// A key's claim: whose it is, and the nonce of the entry node that made it, which names the
// one run queued under it: the executing node runs only the message that carries the claim's
// nonce (a claim released after an answer that is not kept, and claimed again, queues a new
// run under a new nonce).
struct Claim {
  ClaimResult result;
  std::string nonce;
};

// How long an entry node keeps trying to queue a request while NATS is away (a JetStream leader
// election takes NATS 2.9 5-10 s) before it answers 503; an executing node waits at least this
// long for a claim written beside its message.
constexpr auto kQueueRetryFor = std::chrono::seconds(15);

// A tenant's seconds in one quota window, summed over the cluster (usage_ledger.h).
struct UsageSums {
  double gpu_seconds = 0, cpu_seconds = 0;
};

}  // namespace kc::cluster
