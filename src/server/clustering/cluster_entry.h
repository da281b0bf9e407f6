// ClusterEntry: POST /execute on a node of a cluster (docs/cluster.md "Routing work"). The
// request, already admitted and its blobs in this node's store, is queued for the pool that can
// run it, and this node answers with the first stored outcome, in steps: queue (retried while
// NATS is away), claim a client's key beside the message, await the outcome, answer from its
// record. It also hears which keys clients retried on other nodes ("attach"), so a request
// whose client hung up is not cancelled under a retry.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <boost/asio.hpp>

#include "cluster/entry_side.h"
#include "cluster/work_message.h"
#include "pool/cancel_flag.h"
#include "server/core/http_reply.h"
#include "server/core/services.h"
#include "server/execute/admitted_request.h"
#include "server/execute/remote_route.h"

namespace kc::server {

class ClusterEntry : public RemoteRoute {
 public:
  // Starts hearing "attach" messages.
  static StatusOr<std::unique_ptr<ClusterEntry>> Start(Services& services,
                                                       cluster::EntrySide& cluster);

  // The reply to an admitted request, from the cluster. With an Idempotency-Key, a retry on
  // any node gets the first run's outcome.
  net::awaitable<HttpReply> Route(std::shared_ptr<AdmittedRequest> admitted, std::string request_id,
                                  std::optional<std::string> idempotency_key,
                                  std::shared_ptr<pool::CancelFlag> cancel);

 private:
  struct Request;
  struct Queued;
  struct Claimed;
  ClusterEntry(Services& services, cluster::EntrySide& cluster)
      : services_(services), cluster_(cluster) {}
  // One try at queueing, on the cluster-calls threads.
  net::awaitable<Queued> Queue(std::shared_ptr<Request> request);
  net::awaitable<StatusOr<Claimed>> ClaimAndQueue(Request& request, cluster::WorkMessage& work,
                                                  const std::string& pool,
                                                  const std::string& tenant);
  // nullopt once the outcome is taken, else the reply for a deadline passed or a client gone.
  net::awaitable<std::optional<HttpReply>> AwaitOutcome(std::shared_ptr<Request> request,
                                                        std::shared_ptr<pool::CancelFlag> cancel);
  // On the parse pool.
  net::awaitable<HttpReply> AnswerFromOutcome(std::string record_text, std::string request_id);
  // Whether a client retried request `key` on some node after `since`.
  bool AttachedSince(const std::string& key, std::chrono::steady_clock::time_point since);
  void NoteAttached(std::string key);

  Services& services_;
  cluster::EntrySide& cluster_;
  std::unique_ptr<cluster::Listening> hear_attach_;
  std::mutex attached_mu_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> attached_;  // attached_mu_
};

}  // namespace kc::server
