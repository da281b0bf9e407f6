// WorkQueue: the cluster's JetStream work queue (docs/cluster.md "Routing work"). An entry node
// publishes a request to kcoral.work.<pool>.<tenant>; the nodes of a pool pull from one
// durable consumer per pool, so a request is delivered to one node at a time, and JetStream
// delivers it again, to any node of the pool, when its node stops saying "in progress".
//
//   KC_ASSIGN_OR_RETURN(auto queue, WorkQueue::Open(link, options));
//   queue->Publish("cpu-1a2b3c4d", "anonymous", key, payload);   // entry node
//   queue->Serve("cpu-1a2b3c4d");                                  // executing node
//   auto delivery = queue->Next(1s);  // then InProgress() while it runs, Ack() when safe
//
// Tenants are subjects from the start, so fair share can pull per tenant later without a new
// stream (docs/cluster.md "Fair share").
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

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
};

// One request pulled from the queue; owns the message.
class Delivery : public WorkItem {
 public:
  explicit Delivery(natsMsg* message);
  ~Delivery() override;
  Delivery(const Delivery&) = delete;
  Delivery& operator=(const Delivery&) = delete;

  std::string_view data() const override;
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

  // Binds this node to `pool`'s consumer (created where it does not exist). Call once.
  Status Serve(const std::string& pool);
  // The next request for the served pool, waiting up to `wait`; null when none came.
  StatusOr<std::unique_ptr<Delivery>> Next(std::chrono::milliseconds wait);

  const WorkQueueOptions& options() const { return options_; }

 private:
  WorkQueue(NatsLink& link, WorkQueueOptions options) : link_(link), options_(options) {}

  NatsLink& link_;
  const WorkQueueOptions options_;
  natsSubscription* pull_ = nullptr;
};

}  // namespace kc::cluster
