// ClusterExecutor: this node's side of the cluster's work queue (docs/cluster.md "Routing
// work"). While a seat is free it pulls the next request of its pool, fetches the blobs it
// lacks from the entry node (or any node), runs it on a seat like a local request, keeps the
// reply where the entry node can answer from it, stores the outcome once, and only then
// acknowledges. A node that dies before that never acknowledged: JetStream gives the request to
// another node. Each request runs on a thread of its own, which says "in progress" while it
// waits for its seat and runs. A free seat pulls from the tenant furthest behind in this
// node's fair share of seat time (pool/fair_share.h), by the weight its requests carry.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "cluster/cluster_node.h"
#include "cluster/work_message.h"
#include "pool/cancel_flag.h"
#include "pool/fair_share.h"
#include "pool/worker_pool.h"
#include "server/core/http_reply.h"
#include "server/core/services.h"
#include "server/execute/admitted_request.h"
#include "server/tenancy/tenant_quotas.h"
#include "store/blob.h"

namespace kc::server {

class ClusterExecutor {
 public:
  // Starts pulling `pool` for at most `seats` requests at a time.
  static StatusOr<std::unique_ptr<ClusterExecutor>> Start(Services& services,
                                                          cluster::ClusterNode& node,
                                                          std::string pool, int seats);
  // Stops pulling and waits for the requests it runs.
  ~ClusterExecutor();
  // Stops pulling; running requests go on.
  void Stop();

 private:
  ClusterExecutor(Services& services, cluster::ClusterNode& node, std::string pool, int seats)
      : services_(services), node_(node), pool_(std::move(pool)), seats_(seats) {}
  void PullLoop();
  // Runs one request; returns its tenant's weight, for the seat time it is charged.
  double Execute(std::unique_ptr<cluster::WorkItem> item);
  // Whether the message is the run of its key's claim (cluster_entry.cc writes the claim
  // beside the message): "" when it is, else why it is dropped unrun.
  std::string NotTheClaimedRun(const cluster::WorkMessage& work, cluster::WorkItem& item);
  // A redelivered request's stored outcome, asked of the outcome bucket's leader until it
  // answers (saying "in progress" meanwhile): a request is never run again on a read that
  // failed. None once the request's deadline passed (Run then refuses it unrun); an error only
  // when this node stops.
  StatusOr<std::optional<std::string>> StoredBeforeRerun(const cluster::WorkMessage& work,
                                                         cluster::WorkItem& item);
  // StoredBeforeRerun, asked again (saying "in progress") while another node holds the
  // request's run (docs/cluster.md "The run lease"): until its outcome is stored, the holder
  // lets go of the key or is presumed dead (silent past the lease), or the deadline passes.
  StatusOr<std::optional<std::string>> StoredOnceUnheld(const cluster::WorkMessage& work,
                                                        cluster::WorkItem& item);
  // Another delivery of this message runs here, or stores its outcome (JetStream handed the
  // message over twice, after its brokers restarted): waits until that run lets go of the key.
  // True, holding the key, when it ended without an outcome and this delivery should run;
  // false when this one was answered by its outcome (acknowledged) or given back.
  bool HoldAfterRunHere(const cluster::WorkMessage& work, cluster::WorkItem& item);
  // The event `cluster_rerun_waited`: a redelivered request waited for `holder` since `waiting`.
  void RerunWaited(const cluster::WorkMessage& work, const cluster::RunHolder& holder,
                   std::chrono::steady_clock::time_point waiting, const char* outcome);
  // This node's heartbeats have failed for half the run lease: other nodes may soon take its
  // runs, so it gives up those still running.
  bool Fenced() const;
  // When Fenced: says so (cluster_run_fenced), gives the message back unrun and returns true.
  bool GaveBackFenced(const cluster::WorkMessage& work, cluster::WorkItem& item);
  // The reply for one request's message, in Run's steps: a request started too often or past
  // its deadline is refused; the program and its blobs are made ready (fetched from the entry
  // node, else any node); it runs on a seat, saying "in progress" while it waits and runs.
  // An error, and no reply, when the run was cancelled because this node was Fenced.
  StatusOr<HttpReply> Run(const cluster::WorkMessage& work, cluster::WorkItem& item,
                          RunUsage& used);
  // `left_ms`: what is left of the request's time, read once as Run starts.
  std::optional<HttpReply> TooLateOrTooOften(const cluster::WorkMessage& work,
                                             cluster::WorkItem& item, int64_t left_ms);
  StatusOr<store::BlobPtr> FetchBlob(const cluster::WorkMessage& work, const std::string& sha);
  StatusOr<AdmittedRequest> Admit(const cluster::WorkMessage& work, int64_t left_ms);
  // kResourceExhausted: the seats are full; kUnavailable: cancelled, this node Fenced.
  StatusOr<pool::JobResult> RunOnSeat(const cluster::WorkMessage& work,
                                      const AdmittedRequest& admitted, cluster::WorkItem& item);
  // Keeps the reply where the entry node answers from it, stores the outcome, acknowledges.
  // True when this node's outcome is the request's answer. `run_ms` is what Run took.
  bool Finish(const cluster::WorkMessage& work, const HttpReply& reply, double run_ms,
              cluster::WorkItem& item);

  Services& services_;
  cluster::ClusterNode& node_;
  const std::string pool_;  // its id (cluster::PoolIdOf)
  const int seats_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<cluster::Listening> hear_cancel_;
  std::mutex mu_;
  std::condition_variable freed_;
  int running_ = 0;        // mu_
  pool::FairShare share_;  // mu_: which tenant's queue a free seat pulls from next
  std::unordered_map<std::string, std::shared_ptr<pool::CancelFlag>> cancels_;  // mu_
  std::thread puller_;
};

}  // namespace kc::server
