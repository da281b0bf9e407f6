#include "server/clustering/cluster_executor.h"

#include <chrono>
#include <future>

#include "base/clock.h"
#include "base/rounded.h"
#include "base/utc_time.h"
#include "cluster/outcome_record.h"
#include "cluster/peer_client.h"
#include "pool/worker_pool.h"
#include "server/clustering/outcome_record.h"
#include "server/core/server_config.h"
#include "server/execute/admitted_request.h"
#include "server/execute/outcome_reply.h"
#include "server/status/event_log.h"
#include "server/status/request_accounting.h"
#include "server/tenancy/tenant_quotas.h"
#include "store/blob_store.h"

namespace kc::server {

namespace {

// A claim not there yet (its entry node writes it beside the message) is looked for again at
// most this far apart.
constexpr auto kClaimPoll = std::chrono::milliseconds(500);
// A message that came a moment before the wake confirming its claim waits this long for it
// before reading the claim (a read: 0.2-0.4 ms on the GPU machine).
constexpr auto kConfirmWait = std::chrono::microseconds(500);

// This node's hold on a key (ClusterNode::HoldRun), let go of once: by Release or at scope's
// end, after the outcome is stored. None when a run here holds the key already.
class HeldRun {
 public:
  HeldRun(cluster::ClusterNode& node, std::string key)
      : node_(node), key_(std::move(key)), held_(node_.HoldRun(key_)) {}
  ~HeldRun() { Release(); }
  HeldRun(const HeldRun&) = delete;
  HeldRun& operator=(const HeldRun&) = delete;
  bool held() const { return held_; }
  void Took() { held_ = true; }  // ClusterExecutor::HoldAfterRunHere took it
  void Release() {
    if (held_) node_.ReleaseRun(key_);
    held_ = false;
  }

 private:
  cluster::ClusterNode& node_;
  const std::string key_;
  bool held_;
};

}  // namespace

StatusOr<std::unique_ptr<ClusterExecutor>> ClusterExecutor::Start(Services& services,
                                                                  cluster::ClusterNode& node,
                                                                  std::string pool, int seats) {
  std::unique_ptr<ClusterExecutor> executor(
      new ClusterExecutor(services, node, pool, std::max(1, seats)));
  KC_RETURN_IF_ERROR(node.Serve(pool));
  auto raw = executor.get();
  KC_ASSIGN_OR_RETURN(executor->hear_cancel_, node.Hear("cancel", [raw](std::string key) {
    std::lock_guard lock(raw->mu_);
    if (auto it = raw->cancels_.find(key); it != raw->cancels_.end()) it->second->Raise();
  }));
  executor->puller_ = std::thread([raw] { raw->PullLoop(); });
  return executor;
}

ClusterExecutor::~ClusterExecutor() {
  Stop();
  if (puller_.joinable()) puller_.join();
  std::unique_lock lock(mu_);
  freed_.wait(lock, [&] { return running_ == 0; });
}

void ClusterExecutor::Stop() {
  stopping_ = true;
  freed_.notify_all();
}

void ClusterExecutor::PullLoop() {
  while (!stopping_) {
    {
      std::unique_lock lock(mu_);
      freed_.wait(lock, [&] { return running_ < seats_ || stopping_; });
      if (stopping_) return;
    }
    // A node its peers have not heard from for half the run lease takes no work: they may
    // presume it dead before it could finish, and run the same program again.
    if (Fenced()) {
      std::this_thread::sleep_for(node_.options().heartbeat);
      continue;
    }
    auto next = node_.NextWork(std::chrono::milliseconds(500), [this](const std::string& tenant) {
      std::lock_guard lock(mu_);
      return share_.VirtualTime(tenant);
    });
    if (!next.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // NATS away: try again
      continue;
    }
    if (*next == nullptr) continue;
    if (stopping_) {
      (*next)->GiveBack();
      return;
    }
    const std::string tenant = (*next)->tenant();
    {
      std::lock_guard lock(mu_);
      ++running_;
      share_.Arrive(tenant);
      share_.Grant(tenant);
    }
    std::thread([this, tenant, item = std::move(*next)]() mutable {
      const auto started = Clock::now();
      const double weight = Execute(std::move(item));
      std::lock_guard lock(mu_);
      share_.Charge(tenant, weight, MillisecondsSince(started) / 1000);
      --running_;
      freed_.notify_all();  // the last use of `this` on this thread
    }).detach();
  }
}

double ClusterExecutor::Execute(std::unique_ptr<cluster::WorkItem> item) {
  StatusOr<cluster::WorkMessage> decoded = cluster::WorkMessage::Decode(item->data());
  if (!decoded.ok()) {
    services_.events.Emit(EventLevel::kError, "cluster_request_dropped",
                          {{"reason", decoded.status().message()}});
    (void)item->Ack();
    return 1;
  }
  const cluster::WorkMessage& work = *decoded;
  const std::string& key = work.key;
  const double weight = work.weight;
  const std::string& request_id = work.request_id;
  if (GaveBackFenced(work, *item)) return weight;  // fetched just before: as above
  // Delivered before, or queued again by a retry? Its outcome, if one was stored, is the answer,
  // whoever stored it. (A first request's first delivery has none: the entry node looked before
  // queueing it.)
  const bool again = item->delivered() > 1 || work.retry;
  if (again) {
    auto stored = StoredOnceUnheld(work, *item);
    if (!stored.ok()) {  // stopping: another node asks
      item->GiveBack();
      return weight;
    }
    if (stored->has_value()) {
      (void)item->Ack();
      return weight;
    }
  }
  // This node's records list the key from here: a claim read can wait 5 s on a paused broker
  // without a word to JetStream, which then hands the message to another node, and that node
  // ran it beside this one (a duplicate in the fault campaign's broker-pause) unless it saw
  // the key listed here. A redelivery waits in StoredOnceUnheld unlisted, so two never wait on
  // each other. (Already held by a run here, the key is listed already.)
  const int64_t fetched_us = UnixMicrosecondsNow();
  HeldRun held(node_, key);
  // A claim that a wake confirmed needs no read: the entry node's wake follows its claim, and
  // usually comes before the message (docs/cluster.md "Publishes sent at once").
  const auto checking = Clock::now();
  const bool claim_read = work.claim && !node_.TakeConfirmedClaim(*work.claim, kConfirmWait);
  if (claim_read) {
    if (std::string why = NotTheClaimedRun(work, *item); !why.empty()) {
      if (stopping_) {  // it stopped waiting for the claim: another node waits on
        item->GiveBack();
        return weight;
      }
      services_.events.Emit(EventLevel::kInfo, "cluster_request_dropped",
                            {{"request_id", request_id}, {"key", key}, {"reason", why}});
      (void)item->Ack();
      return weight;
    }
  }
  if (again && claim_read) {
    // The claim's read may have waited a while: the first run may have stored its outcome since.
    auto stored = node_.StoredOutcome(key);
    if (stored.ok() && stored->has_value()) {
      (void)item->Ack();
      return weight;
    }
  }
  // The claimed run, held here by another delivery of this message (JetStream handed it over
  // twice): that one's outcome, or this one runs once it ended unstored.
  if (!held.held()) {
    if (!HoldAfterRunHere(work, *item)) return weight;
    held.Took();
  }
  // Fenced while it read the claim (a broker that does not answer stalls both): a run started
  // now would be cancelled at once, after its program had begun.
  if (GaveBackFenced(work, *item)) return weight;
  nlohmann::json started = {{"request_id", request_id},
                            {"key", key},
                            {"entry_node", work.entry_node},
                            {"delivered", item->delivered()}};
  if (work.queued_unix_us)
    started["transit_ms"] = Rounded((fetched_us - *work.queued_unix_us) / 1e3);
  if (work.claim) {
    started["claim_read"] = claim_read;
    started["claim_ms"] = Rounded(MillisecondsSince(checking));
  }
  services_.events.Emit(EventLevel::kInfo, "cluster_request_started", std::move(started));
  RunUsage used;
  const auto running = Clock::now();
  StatusOr<HttpReply> reply = Run(work, *item, used);
  const double run_ms = MillisecondsSince(running);
  if (!reply.ok()) {
    services_.events.Emit(EventLevel::kWarning, "cluster_run_fenced",
                          {{"request_id", request_id},
                           {"key", key},
                           {"run_ms", Rounded(run_ms)},
                           {"reason", reply.status().message()}});
    held.Release();  // before the message goes back: its next run need not wait for a beat
    item->GiveBack();
    return weight;
  }
  // Charged once per request: only by the node whose outcome is the answer, so a redelivered
  // run is never charged twice.
  if (Finish(work, *reply, run_ms, *item)) services_.quotas.Charge(work.tenant, used);
  return weight;
}

StatusOr<std::optional<std::string>> ClusterExecutor::StoredBeforeRerun(
    const cluster::WorkMessage& work, cluster::WorkItem& item) {
  for (auto pause = std::chrono::milliseconds(50);; pause = std::min(2 * pause, kClaimPoll)) {
    auto stored = node_.StoredOutcome(work.key);
    if (stored.ok()) return stored;
    if (stopping_) return stored.status();
    if (UnixMillisecondsNow() > work.deadline_unix_ms) return std::optional<std::string>();
    item.InProgress();
    std::this_thread::sleep_for(pause);
  }
}

StatusOr<std::optional<std::string>> ClusterExecutor::StoredOnceUnheld(
    const cluster::WorkMessage& work, cluster::WorkItem& item) {
  const auto waiting = Clock::now();
  std::optional<cluster::RunHolder> waited_for;
  for (auto pause = std::chrono::milliseconds(50);; pause = std::min(2 * pause, kClaimPoll)) {
    // The holder before the outcome: one that no longer lists the key stored its outcome first.
    const std::optional<cluster::RunHolder> holder = node_.HolderOf(work.key, pool_);
    KC_ASSIGN_OR_RETURN(std::optional<std::string> stored, StoredBeforeRerun(work, item));
    const bool late = UnixMillisecondsNow() > work.deadline_unix_ms;
    if (stored || !holder || late) {
      if (!stored && !holder && !waited_for) {  // run again at once: what the holders said
        services_.events.Emit(EventLevel::kInfo, "cluster_rerun_unheld",
                              {{"request_id", work.request_id},
                               {"key", work.key},
                               {"pool", pool_},
                               {"holders", node_.DescribeHolders(work.key)}});
      }
      if (waited_for) {
        const bool dead = Clock::now() - waited_for->heard > node_.options().run_lease;
        RerunWaited(work, *waited_for, waiting,
                    stored ? "stored"
                    : late ? "deadline"
                    : dead ? "holder_presumed_dead"
                           : "released");
      }
      return stored;
    }
    if (stopping_) return UnavailableError("stopping");  // another node waits on
    waited_for = holder;
    if (pause >= kClaimPoll) item.InProgress();
    std::this_thread::sleep_for(pause);
  }
}

void ClusterExecutor::RerunWaited(const cluster::WorkMessage& work,
                                  const cluster::RunHolder& holder, Clock::time_point waiting,
                                  const char* outcome) {
  services_.events.Emit(
      EventLevel::kInfo, "cluster_rerun_waited",
      {{"request_id", work.request_id},
       {"key", work.key},
       {"holder",
        holder.node_id.empty() ? "unknown (this node heard no heartbeat)" : holder.node_id},
       {"listed", holder.listed},
       {"holder_in_view", holder.in_view},
       {"waited_ms", Rounded(MillisecondsSince(waiting))},
       {"outcome", outcome}});
}

bool ClusterExecutor::HoldAfterRunHere(const cluster::WorkMessage& work, cluster::WorkItem& item) {
  const auto waiting = Clock::now();
  const cluster::RunHolder here{
      .node_id = node_.node_id(), .heard = waiting, .listed = true, .in_view = true};
  auto said = [&](const char* outcome) { RerunWaited(work, here, waiting, outcome); };
  for (auto pause = std::chrono::milliseconds(50);; pause = std::min(2 * pause, kClaimPoll)) {
    if (stopping_ || UnixMillisecondsNow() > work.deadline_unix_ms) {
      said(stopping_ ? "stopping" : "deadline");
      item.GiveBack();
      return false;
    }
    item.InProgress();
    std::this_thread::sleep_for(pause);
    if (!node_.HoldRun(work.key)) continue;
    auto stored = node_.StoredOutcome(work.key);
    if (stored.ok() && stored->has_value()) {  // that run's outcome is the answer
      node_.ReleaseRun(work.key);
      said("stored");
      (void)item.Ack();
      return false;
    }
    said("released");  // that run ended unstored (cancelled, fenced): this one runs
    return true;
  }
}

bool ClusterExecutor::GaveBackFenced(const cluster::WorkMessage& work, cluster::WorkItem& item) {
  if (!Fenced()) return false;
  services_.events.Emit(EventLevel::kWarning, "cluster_run_fenced",
                        {{"request_id", work.request_id},
                         {"key", work.key},
                         {"run_ms", 0},
                         {"reason", "fenced before it started: given back unrun"}});
  item.GiveBack();
  return true;
}

bool ClusterExecutor::Fenced() const {
  const auto failing = node_.WritesFailingSince();
  return failing && Clock::now() - *failing > node_.options().run_lease / 2;
}

std::string ClusterExecutor::NotTheClaimedRun(const cluster::WorkMessage& work,
                                              cluster::WorkItem& item) {
  const std::string& key = work.key;
  const std::string nonce = work.claim.value_or("");
  // The entry node retries its claim while NATS is away: it is waited for that long, and more.
  const int64_t give_up_ms =
      std::min(work.deadline_unix_ms,
               UnixMillisecondsNow() +
                   std::chrono::milliseconds(cluster::kQueueRetryFor + kClaimPoll * 10).count());
  bool another_seen = false;
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(2 * pause, kClaimPoll)) {
    auto held = node_.ClaimNonce(key);
    if (held.ok() && held->has_value()) {
      if (**held == nonce) return "";
      // Seen twice, a while apart: a replica that lags a released claim is not believed.
      if (another_seen) {
        return "its key's claim names another run (a retry attached to the first run, or "
               "another program was sent under the key and refused)";
      }
      another_seen = true;
      pause = std::max(pause, std::chrono::milliseconds(50));
    }
    if (UnixMillisecondsNow() > give_up_ms || stopping_) {
      return "its key was never claimed (its entry node died or gave up while queueing it)";
    }
    if (pause >= kClaimPoll) item.InProgress();
    std::this_thread::sleep_for(pause);
  }
}

std::optional<HttpReply> ClusterExecutor::TooLateOrTooOften(const cluster::WorkMessage& work,
                                                            cluster::WorkItem& item,
                                                            int64_t left_ms) {
  if (static_cast<int>(item.delivered()) > node_.max_runs()) {
    return EndingReply(RequestEnding::kCrashed,
                       "the request was started " + std::to_string(node_.max_runs()) +
                           " times and the node running it died each time; it is not run again",
                       work.request_id);
  }
  if (left_ms <= 0) {
    return EndingReply(RequestEnding::kTimedOut,
                       "the request's timeout ran out before a node of its pool was free",
                       work.request_id);
  }
  return std::nullopt;
}

StatusOr<store::BlobPtr> ClusterExecutor::FetchBlob(const cluster::WorkMessage& work,
                                                    const std::string& sha) {
  // The entry node first, then every other node the view knows.
  std::vector<std::string> sources = {work.entry_url};
  const auto view = node_.View();  // held: a range-for would not keep a temporary alive
  for (const auto& node : view->nodes)
    if (node.value("url", "") != sources.front()) sources.push_back(node.value("url", ""));
  // Every node's reason, the entry node's first: a certificate that does not verify is not
  // hidden behind the other nodes' "not here".
  std::string reasons;
  for (const auto& url : sources) {
    if (url.empty() || url == services_.node_url) continue;
    const auto started = std::chrono::steady_clock::now();
    auto blob = services_.peers->Fetch(url, sha);
    if (blob.ok()) {
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - started;
      services_.events.Emit(EventLevel::kInfo, "cluster_blob_fetched",
                            {{"request_id", work.request_id},
                             {"sha256", sha},
                             {"from", url},
                             {"bytes", (*blob)->size()},
                             {"ms", Rounded(took.count(), 0.01)}});  // with the hash pass
      return blob;
    }
    if (reasons.size() < 2000) reasons += (reasons.empty() ? "" : "; ") + blob.status().message();
  }
  // A 503, never kept: the client's retry sends the blob again.
  return UnavailableError("blob " + sha + " could not be fetched from any node: " +
                          (reasons.empty() ? "no other node is known" : reasons));
}

StatusOr<AdmittedRequest> ClusterExecutor::Admit(const cluster::WorkMessage& work,
                                                 int64_t left_ms) {
  AdmittedRequest admitted;
  admitted.request.program_json = work.program.value_or("");
  if (work.program_sha256) {
    store::BlobPtr blob = services_.blobs.memory().Get(*work.program_sha256);
    if (blob == nullptr) {
      KC_ASSIGN_OR_RETURN(blob, FetchBlob(work, *work.program_sha256));
    }
    KC_ASSIGN_OR_RETURN(admitted.request.program_json, blob->ReadAll());
  }
  KC_ASSIGN_OR_RETURN(admitted.request.program,
                      protocol::ParseProgram(admitted.request.program_json));
  auto resolution = services_.blobs.Resolve(admitted.request.program, {});
  if (!resolution.ok()) return resolution.status();
  if (!resolution->missing.empty()) {  // the blobs it lacks, from the entry node or any other
    std::unordered_map<std::string, store::BlobPtr> fetched;
    for (const auto& sha : resolution->missing) {
      KC_ASSIGN_OR_RETURN(store::BlobPtr blob, FetchBlob(work, sha));
      fetched.emplace(sha, std::move(blob));
    }
    resolution = services_.blobs.Resolve(admitted.request.program, fetched);
    if (!resolution.ok()) return resolution.status();
  }
  admitted.resolution = std::move(*resolution);
  admitted.timeout_seconds = std::min(work.timeout_seconds, static_cast<double>(left_ms) / 1e3);
  admitted.output_limit_bytes = work.output_limit_bytes;
  // The entry node admitted it for its tenant: seats and leases here share by that weight.
  admitted.share = {work.tenant, work.weight};
  return admitted;
}

StatusOr<pool::JobResult> ClusterExecutor::RunOnSeat(const cluster::WorkMessage& work,
                                                     const AdmittedRequest& admitted,
                                                     cluster::WorkItem& item) {
  auto cancel = std::make_shared<pool::CancelFlag>();
  {
    std::lock_guard lock(mu_);
    cancels_[work.key] = cancel;
  }
  auto job = JobFor(admitted, work.request_id, cancel, services_.config.max_response_bytes);
  std::promise<pool::JobResult> done;
  auto result = done.get_future();
  job->done = [&done](pool::JobResult r) { done.set_value(std::move(r)); };
  const bool submitted = services_.pool.Submit(job);
  bool fenced = false;
  if (submitted) {
    const auto say_every =
        std::chrono::duration_cast<std::chrono::milliseconds>(node_.options().ack_wait) / 3;
    const auto look_every =
        std::min<std::chrono::milliseconds>(say_every, node_.options().heartbeat);
    auto said = Clock::now();
    while (result.wait_for(look_every) != std::future_status::ready) {
      if (!fenced && Fenced()) {
        fenced = true;
        cancel->Raise();
      }
      if (Clock::now() - said >= say_every) {
        item.InProgress();
        said = Clock::now();
      }
    }
  }
  {
    std::lock_guard lock(mu_);
    cancels_.erase(work.key);
  }
  if (!submitted) return ResourceExhaustedError("the node's seats are full");
  if (fenced) {
    return UnavailableError(
        "this node's heartbeats failed for half the run lease: its run was "
        "cancelled, for another node to take once the lease runs out");
  }
  return result.get();
}

StatusOr<HttpReply> ClusterExecutor::Run(const cluster::WorkMessage& work, cluster::WorkItem& item,
                                         RunUsage& used) {
  const int64_t left_ms = work.deadline_unix_ms - UnixMillisecondsNow();
  if (std::optional<HttpReply> refused = TooLateOrTooOften(work, item, left_ms)) {
    return std::move(*refused);
  }
  StatusOr<AdmittedRequest> admitted = Admit(work, left_ms);
  if (!admitted.ok()) {
    return EndingReply(EndingForStatus(admitted.status()), admitted.status().message(),
                       work.request_id);
  }
  if (work.tenant != cluster::kAnonymousTenant) {
    services_.events.NameTenant(work.request_id, work.tenant);
  }
  StatusOr<pool::JobResult> ran = RunOnSeat(work, *admitted, item);
  if (!ran.ok() && ran.status().code() == StatusCode::kResourceExhausted) {
    return EndingReply(RequestEnding::kSaturated, ran.status().message(), work.request_id);
  }
  if (!ran.ok()) return ran.status();
  if (ran->ran) used = RecordRun(services_.metrics, *ran);
  OutcomeContext context{work.request_id, &admitted->request.program,
                         services_.config.max_response_bytes, admitted->output_limit_bytes};
  return BuildOutcomeReply(context, *ran);
}

bool ClusterExecutor::Finish(const cluster::WorkMessage& work, const HttpReply& reply,
                             double run_ms, cluster::WorkItem& item) {
  const std::string& key = work.key;
  const std::string& entry_url = work.entry_url;
  const std::string& request_id = work.request_id;
  auto record = RecordOf(reply, node_.node_id());
  if (!record.ok()) {
    services_.events.Emit(EventLevel::kError, "cluster_outcome_unstored",
                          {{"request_id", request_id}, {"error", record.status().message()}});
    return false;  // not acknowledged: another node tries
  }
  // Refusals and "try again" are answered, never kept (a retry runs anew); so is a
  // cancellation, which nobody waits for.
  const bool kept = reply.status != 400 && reply.status != 409 && reply.status != 429 &&
                    reply.status != 499 && reply.status != 503 &&
                    reply.ending != RequestEnding::kCacheMiss;
  if (!kept && record->body == nullptr) {
    node_.AnswerOnce(key, record->record.Encode());
    (void)item.Ack();
    return true;
  }
  if (record->body != nullptr) {
    // The entry node answers from its own copy; this node keeps one for retries elsewhere.
    services_.blobs.Add(record->body);
    std::vector<std::string>& holders = record->record.body_blob->holders;
    holders = {services_.node_url};
    if (!entry_url.empty() && entry_url != services_.node_url) {
      // A failed push costs the entry node a fetch from this one, nothing more: logged, not
      // an error.
      const Status pushed = services_.peers->Push(entry_url, record->body);
      nlohmann::json fields = {{"request_id", request_id},
                               {"sha256", record->body->sha256()},
                               {"to", entry_url},
                               {"bytes", record->body->size()}};
      if (pushed.ok()) {
        services_.events.Emit(EventLevel::kInfo, "cluster_blob_pushed", std::move(fields));
        holders.insert(holders.begin(), entry_url);
      } else {
        fields["error"] = pushed.message();
        services_.events.Emit(EventLevel::kWarning, "cluster_blob_push_failed", std::move(fields));
      }
    }
  }
  // The result is in hand: a bucket without a leader for a while (an election takes NATS
  // 2.9 5-10 s) is waited out, still "in progress", rather than run again elsewhere.
  const std::string text = record->record.Encode();
  const int64_t give_up_ms = work.deadline_unix_ms + 10'000;
  auto pause = std::chrono::milliseconds(100);
  const auto storing = Clock::now();
  auto stored = node_.StoreOutcome(key, text);
  while (!stored.ok() && UnixMillisecondsNow() < give_up_ms && !stopping_) {
    services_.events.Emit(EventLevel::kWarning, "cluster_outcome_store_retry",
                          {{"request_id", request_id}, {"error", stored.status().message()}});
    item.InProgress();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
    stored = node_.StoreOutcome(key, text);
  }
  if (!stored.ok()) {
    services_.events.Emit(EventLevel::kError, "cluster_outcome_unstored",
                          {{"request_id", request_id}, {"error", stored.status().message()}});
    return false;  // not acknowledged: JetStream gives it to another node after ack_wait
  }
  const double store_ms = MillisecondsSince(storing);  // retries included
  const Status acked = item.Ack();
  services_.events.Emit(EventLevel::kInfo, "cluster_request_executed",
                        {{"request_id", request_id},
                         {"key", key},
                         {"delivered", item.delivered()},
                         {"first_outcome", *stored},
                         {"http_status", reply.status},
                         {"acknowledged", acked.ok()},
                         {"run_ms", Rounded(run_ms)},
                         {"store_ms", Rounded(store_ms)}});
  return *stored;
}

}  // namespace kc::server
