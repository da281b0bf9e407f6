// WorkQueue: the cluster's JetStream work queue (docs/cluster.md "Routing work"). An entry node
// publishes a request to kcoral.work.<pool>.<tenant>; the nodes of a pool pull from one
// durable consumer per pool and tenant, so a request is delivered to one node at a time, and
// JetStream delivers it again, to any node of the pool, when its node stops saying "in
// progress".
//
// Fair share (docs/cluster.md "Fair share"): when a seat frees, the executing node asks the
// tenants' consumers in the order it is given (the tenant furthest behind first) and takes the
// first request it finds, so one tenant's 5,000 queued requests never stand before another's
// 10. An entry node creates its tenant's consumer before its first publish and then says
// "kcoral.wake.<pool>" (core NATS, the tenant as data), so idle nodes pull at once. A node asks
// only the queues of tenants woken since it last found them empty, and those a sweep (every
// 500 ms, and when idle for `wait`) finds requests of in the stream: redeliveries, missed
// wakes, consumers it has not bound. An idle tenant costs no ask, and after
// `idle_consumer` no consumer either: JetStream deletes it (each is a Raft group, busy while
// it lives), and the next node to use it makes it again.
//
//   KC_ASSIGN_OR_RETURN(auto queue, WorkQueue::Open(link, options));
//   queue->Publish("cpu-1a2b3c4d", "alice", key, payload);   // entry node
//   queue->Wake("cpu-1a2b3c4d", "alice", claim_nonce);
//   queue->Serve("cpu-1a2b3c4d");                              // executing node
//   auto delivery = queue->Next(1s, rank);  // then InProgress() while it runs, Ack() when safe
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/status.h"
#include "cluster/cluster_types.h"
#include "cluster/nats_link.h"

namespace kc::cluster {

struct WorkQueueOptions {
  // How long a delivery may go without word from its node before JetStream gives it to
  // another node of the pool.
  std::chrono::seconds ack_wait{30};
  // How many times a request may start (each start that ended with its node's death counts);
  // the delivery after the last is answered FAILED, never run.
  int max_runs = 3;
  // Publishes with one id inside this window are one message (a retried entry republishes).
  std::chrono::seconds duplicate_window{3600};
  // A tenant's consumer that nobody asked, nor heard "in progress" from, this long is deleted
  // by JetStream. At least twice ack_wait: a dead node's delivery is redelivered first.
  std::chrono::seconds idle_consumer{600};
};

// One request pulled from the queue; owns the message.
class Delivery : public WorkItem {
 public:
  explicit Delivery(natsMsg* message);
  ~Delivery() override;
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  std::string_view data() const override;
  // The tenant's subject token: the last part of kcoral.work.<pool>.<tenant>.
  std::string tenant() const override;
  // 1 for the first delivery, 2 after one redelivery, ...
  uint64_t delivered() const override { return delivered_; }
  // Tells JetStream the node is still on it (resets AckWait).
  void InProgress() override;
  // Done: the outcome is safe. Waits for JetStream's confirmation.
  Status Ack() override;
  // Given back at once, for another node (this node is stopping).
  void GiveBack() override;

 private:
  natsMsg* message_;
  uint64_t delivered_ = 1;
};

class WorkQueue {
 public:
  static constexpr const char* kStream = "KCORAL_WORK";

  // The stream, created where it does not exist yet (with the link's replicas).
  static StatusOr<std::unique_ptr<WorkQueue>> Open(NatsLink& link, WorkQueueOptions options);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `payload` for `pool`. A second publish with the same `id` inside the duplicate
  // window is dropped by JetStream, so an entry node that retries never queues a run twice.
  Status Publish(std::string_view pool, std::string_view tenant, const std::string& id,
                 std::string_view payload);
  // Wakes an idle node of `pool` for `tenant`'s request; one that misses it finds the request
  // within its wait. `claim_nonce`, when the request has a claim, says the claim is written
  // and holds that nonce, so the node that fetches it need not read the claim.
  void Wake(std::string_view pool, std::string_view tenant, std::string_view claim_nonce);

  // This node pulls `pool`'s requests from now on. Call once.
  Status Serve(const std::string& pool);
  // The next request for the served pool, from the tenant of lowest `rank` that has one,
  // waiting up to `wait` for one to come; null when none came.
  using Rank = std::function<double(const std::string& tenant)>;
  StatusOr<std::unique_ptr<Delivery>> Next(std::chrono::milliseconds wait, const Rank& rank);

  // True, once, when a wake this node heard said the claim of `nonce` holds (waiting up to
  // `wait` for that wake).
  bool TakeConfirmedClaim(const std::string& nonce, std::chrono::microseconds wait);

  const WorkQueueOptions& options() const { return options_; }

 private:
  WorkQueue(NatsLink& link, WorkQueueOptions options) : link_(link), options_(options) {}
  static std::string Durable(std::string_view pool, std::string_view tenant);
  // The durable consumer of (pool, tenant), created where it does not exist. One this node
  // made or found within half of idle_consumer, and heard no deletion of since, costs no
  // request.
  Status EnsureConsumer(const std::string& pool, const std::string& tenant);
  // Hears JetStream's advisories of the stream's deleted consumers (idle, or by hand), so the
  // next use makes them again; a missed one waits out half of idle_consumer.
  void HearDeletions();
  // The tenants' queues to ask from now on, their consumers bound where they were not yet.
  Status ToAsk(const std::set<std::string>& tenants);
  // Every tenant of the served pool with a request in the stream, to ask: what comes without a
  // wake (a redelivery, a wake this node missed) and tenants it has not bound.
  Status Sweep();
  // A request from the queues to ask, in `rank` order; each found empty is dropped from them.
  std::unique_ptr<Delivery> AskInOrder(const Rank& rank);
  // One request from `pull`'s queue, or null once `hold` passed without one.
  std::unique_ptr<Delivery> TryFetch(natsSubscription* pull, std::chrono::milliseconds hold);
  static constexpr std::chrono::milliseconds kAskHold{2}, kLastAskHold{20};
  // How often a sweep looks, whatever the wakes said (and when idle for Next's `wait`): a
  // request redelivered (its node died, or gave it back) comes with no wake, nor does one
  // whose wake this node missed.
  static constexpr std::chrono::milliseconds kSweepEvery{500};
  // A wake (on a NATS thread): its tenant is woken, its claim nonce, if any, confirmed.
  void HeardWake(std::string_view data);

  NatsLink& link_;
  const WorkQueueOptions options_;
  std::mutex ensured_mu_;
  // (pool, tenant) consumers this node made or found, and until when it takes them for alive;
  // ensured_mu_.
  std::map<std::string, std::chrono::steady_clock::time_point> ensured_;
  natsSubscription* deletions_ = nullptr;
  // The executing side: one thread (the executor's puller).
  std::string pool_;
  natsSubscription* wake_ = nullptr;
  std::map<std::string, natsSubscription*> pulls_;  // by tenant
  // The tenants whose queues may hold a request: woken or swept, and not found empty since.
  // Only these are asked, so an idle tenant costs nothing.
  std::set<std::string> to_ask_;
  std::chrono::steady_clock::time_point last_sweep_;
  std::string last_found_;            // the tenant whose queue gave the last request
  std::set<std::string> just_woken_;  // woken and not asked since: asked with the longer hold
  // What the wakes said: the tenants woken since the puller last looked, and the claim nonces
  // confirmed, the newest kConfirmedKept (most are fetched by other nodes).
  static constexpr size_t kConfirmedKept = 16384;
  std::mutex wakes_mu_;
  std::condition_variable heard_;
  std::set<std::string> woken_;                // wakes_mu_
  std::unordered_set<std::string> confirmed_;  // wakes_mu_
  std::deque<std::string> confirmed_order_;    // wakes_mu_
};

}  // namespace kc::cluster
