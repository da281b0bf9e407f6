// The key names the request across nodes: the client's Idempotency-Key under its tenant (so a
// retry on any node finds the run) or a random one.
#include "server/clustering/cluster_entry.h"

#include <chrono>
#include <mutex>
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/experimental/parallel_group.hpp>

#include "base/clock.h"
#include "base/rounded.h"
#include "base/sha256.h"
#include "base/shared_bytes.h"
#include "base/utc_time.h"
#include "cluster/cluster_node.h"
#include "cluster/outcome_record.h"
#include "cluster/peer_client.h"
#include "cluster/pool_view.h"
#include "cluster/work_message.h"
#include "pool/worker_pool.h"
#include "protocol/cuda_code.h"
#include "server/clustering/outcome_record.h"
#include "server/core/request_id.h"
#include "server/core/server_config.h"
#include "server/execute/admitted_request.h"
#include "server/status/event_log.h"
#include "store/blob_store.h"

namespace kc::server {

namespace {

// What the program's GPU code runs on, for the pool it goes to (pool_view.h): the architecture
// its options name, and the code its uploaded libraries carry (read here, where the client
// uploaded them).
cluster::GpuNeed GpuNeedOf(const AdmittedRequest& admitted) {
  const protocol::Program& program = admitted.request.program;
  cluster::GpuNeed need;
  if (program.options.gpu_arch) need.arch = protocol::ArchNumberOf(*program.options.gpu_arch);
  for (const protocol::Instruction& instruction : program.instructions) {
    if (instruction.op != protocol::Op::kUpload ||
        instruction.upload_kind != protocol::UploadKind::kLibrary) {
      continue;
    }
    auto blob = admitted.resolution.blobs.find(instruction.blob);
    if (blob == admitted.resolution.blobs.end()) continue;
    auto bytes = SharedBytes::MapSealedMemfd(blob->second->fd());
    if (!bytes.ok()) continue;  // read nothing: the pool is chosen without it
    for (const protocol::CudaCode& code : protocol::CudaCodeOf(bytes->view())) {
      if (std::find(need.code.begin(), need.code.end(), code) == need.code.end())
        need.code.push_back(code);
    }
  }
  return need;
}

constexpr auto kPoll = std::chrono::milliseconds(250);
// A lost announcement (a NATS reconnect) is made up for by reading the store this often.
constexpr auto kStoreCheck = std::chrono::seconds(2);
// Past the request's deadline, the executing node still gets this long to store its outcome.
constexpr auto kDeadlineGrace = std::chrono::seconds(10);
// A client that hung up on a request with a key may retry elsewhere meanwhile.
constexpr auto kCancelGrace = std::chrono::seconds(5);

// The request's name across nodes. A client's Idempotency-Key is its tenant's own: another
// tenant sending the same key neither attaches to its run nor is refused by it.
std::string ClusterKey(const std::string& tenant,
                       const std::optional<std::string>& idempotency_key) {
  if (idempotency_key) return "k-" + Sha256Hex(tenant + "\n" + *idempotency_key).substr(0, 48);
  return "r-" + Sha256Hex(NewUuid() + std::to_string(UnixMillisecondsNow())).substr(0, 48);
}

}  // namespace

// One request's way through the cluster: what names it, and the outcome when it is announced,
// which may come on a NATS thread at any time once the route listens for it.
struct ClusterEntry::Request {
  std::shared_ptr<AdmittedRequest> admitted;
  std::string request_id;
  std::optional<std::string> idempotency_key;
  std::string key;
  std::string nonce;    // names this request's run under the key's claim (cluster_types.h Claim)
  int queue_tries = 0;  // Queue's: a later try publishes again what an earlier one may have queued
  std::chrono::steady_clock::time_point deadline;
  std::shared_ptr<net::steady_timer> wake;  // fired when the outcome comes
  std::mutex mu;
  std::optional<std::string> record;  // mu

  // The first announced outcome wins; the waiter wakes on the event loop.
  void Deliver(std::string announced, net::io_context& io) {
    {
      std::lock_guard lock(mu);
      if (record) return;
      record = std::move(announced);
    }
    net::post(io, [timer = wake] { timer->expires_at(net::steady_timer::time_point::min()); });
  }
  std::optional<std::string> Taken() {
    std::lock_guard lock(mu);
    return record;
  }
};

// How claiming a client's key and queueing beside it went: the 409 to answer, or the nonce of
// the run queued under the key's claim and how queueing went (`answered`: a retry whose first
// run's outcome was already stored, delivered to the route).
struct ClusterEntry::Claimed {
  std::optional<HttpReply> conflict;
  std::string nonce;
  Status queued;
  bool answered = false;
};

// One try at queueing: the refusal to answer (retryable when NATS is away for now), or the
// subscription that hears the outcome.
struct ClusterEntry::Queued {
  std::optional<HttpReply> refusal;
  bool retryable = false;
  std::unique_ptr<cluster::Listening> listening;
};

namespace {

// The work message of an admitted request; a program too large to travel inline goes into
// this node's blob store, where the executing node fetches it.
StatusOr<cluster::WorkMessage> WorkMessageOf(const AdmittedRequest& admitted,
                                             const std::string& key, const std::string& request_id,
                                             const std::string& node_id, const std::string& url,
                                             store::BlobStore& blobs) {
  cluster::WorkMessage work{
      .key = key,
      .request_id = request_id,
      .entry_node = node_id,
      .entry_url = url,
      .deadline_unix_ms =
          UnixMillisecondsNow() + static_cast<int64_t>(admitted.timeout_seconds * 1000),
      .timeout_seconds = admitted.timeout_seconds,
      .output_limit_bytes = admitted.output_limit_bytes,
      .tenant = admitted.share.tenant,
      .weight = admitted.share.weight};
  work.queued_unix_us = UnixMicrosecondsNow();  // the executing node times the queue
  const std::string& program_json = admitted.request.program_json;
  if (program_json.size() <= cluster::kInlineProgramBytes) {
    work.program = program_json;
  } else {
    const std::string program_hash = Sha256Hex(program_json);
    KC_ASSIGN_OR_RETURN(store::BlobPtr blob, store::Blob::FromBytes(program_hash, program_json));
    blobs.Add(blob);
    work.program_sha256 = program_hash;
  }
  return work;
}

}  // namespace

net::awaitable<ClusterEntry::Queued> ClusterEntry::Queue(std::shared_ptr<Request> route) {
  Queued out;
  const auto started = Clock::now();
  auto fail = [&](const Status& status) {
    out.retryable = status.code() == StatusCode::kUnavailable;  // NATS away, or no pool now
    out.refusal =
        EndingReply(out.retryable ? RequestEnding::kClusterUnavailable : EndingForStatus(status),
                    status.message(), route->request_id);
    return std::move(out);
  };
  const AdmittedRequest& admitted = *route->admitted;
  auto pool = cluster_.ChoosePool(
      NeedsGpu(admitted.request.program),
      services_.pool.describe().value("versions", nlohmann::json::object()), GpuNeedOf(admitted));
  if (!pool.ok()) co_return fail(pool.status());
  auto listening = cluster_.Await(route->key, [this, route](std::string record) {
    route->Deliver(std::move(record), services_.io);
  });
  if (!listening.ok()) co_return fail(listening.status());
  out.listening = std::move(*listening);
  auto work = WorkMessageOf(admitted, route->key, route->request_id, cluster_.node_id(),
                            services_.node_url, services_.blobs);
  if (!work.ok()) co_return fail(work.status());
  if (route->idempotency_key) {
    work->claim = route->nonce;
    // An earlier try's message may have been queued, run and acknowledged, and its id forgotten
    // by a restarted JetStream (work_message.h): marked, it is not run again unchecked.
    work->retry = ++route->queue_tries > 1;
  }
  const std::string tenant = cluster::TenantSubjectToken(work->tenant);
  std::string claim_nonce;  // the nonce of the run queued under the key's claim
  Status queued;
  if (!route->idempotency_key) {
    queued = cluster_.Queue(*pool, tenant, route->key, "", work->Encode());
  } else {
    auto claimed = co_await ClaimAndQueue(*route, *work, *pool, tenant);
    if (!claimed.ok()) co_return fail(claimed.status());
    if (claimed->conflict) {
      out.refusal = std::move(claimed->conflict);
      co_return out;
    }
    if (claimed->answered) co_return out;
    claim_nonce = claimed->nonce;
    queued = claimed->queued;
  }
  if (!queued.ok()) co_return fail(queued);
  // Sent only now that the claim holds, so the node it wakes need not read the claim.
  cluster_.Wake(*pool, tenant, claim_nonce);
  services_.events.Emit(EventLevel::kInfo, "cluster_request_queued",
                        {{"request_id", route->request_id},
                         {"key", route->key},
                         {"pool", *pool},
                         {"ms", Rounded(MillisecondsSince(started))}});
  co_return out;
}

// A key a client may come back with is claimed (a random one is new by making). The claim is
// written beside the message, not before it (two replicated writes at once instead of in a
// row): the executing node runs a message only under a claim that carries its nonce
// (cluster_executor.cc), so the message of a request whose claim another holds is dropped unrun.
net::awaitable<StatusOr<ClusterEntry::Claimed>> ClusterEntry::ClaimAndQueue(
    Request& route, cluster::WorkMessage& work, const std::string& pool,
    const std::string& tenant) {
  const std::string program_hash = Sha256Hex(route.admitted->request.program_json);
  Status queued;
  // Each begins with a post: spawned from a thread of the pool, it would otherwise run at
  // once, inline, and the other would start only after its blocking call.
  std::optional<StatusOr<cluster::Claim>> claim;
  auto [order, claim_threw, queue_threw] =
      co_await net::experimental::make_parallel_group(
          net::co_spawn(
              *services_.cluster_calls,
              [&]() -> net::awaitable<void> {
                co_await net::post(*services_.cluster_calls, net::use_awaitable);
                claim = cluster_.Claim(route.key, program_hash, route.nonce);
              },
              net::deferred),
          net::co_spawn(
              *services_.cluster_calls,
              [&]() -> net::awaitable<void> {
                co_await net::post(*services_.cluster_calls, net::use_awaitable);
                queued = cluster_.Queue(pool, tenant, route.key, route.nonce, work.Encode());
              },
              net::deferred))
          .async_wait(net::experimental::wait_for_all(), net::use_awaitable);
  for (const std::exception_ptr& threw : {claim_threw, queue_threw})
    if (threw) std::rethrow_exception(threw);  // as it would have without the group
  if (!claim->ok()) co_return claim->status();
  Claimed out;
  if ((*claim)->result == cluster::ClaimResult::kOtherProgram) {
    out.conflict = EndingReply(RequestEnding::kConflict,
                               "Idempotency-Key is already bound to another program (or other "
                               "options): a retry must send the same program",
                               route.request_id);
    co_return out;
  }
  out.nonce = (*claim)->nonce;
  if (out.nonce != route.nonce) {
    // A retry: the run queued under the first claim is the answer, wherever it runs.
    cluster_.Tell("attach", route.key);  // the first entry node must not cancel it
    // From the leader: a replica may lag (after the brokers restarted, say) and say "none".
    auto stored = cluster_.StoredOutcome(route.key);
    if (stored.ok() && stored->has_value()) {
      route.Deliver(std::move(**stored), services_.io);
      out.answered = true;
      co_return out;
    }
    // Its message once more (JetStream drops it as a duplicate), in case the first entry node
    // died before queueing it; marked, so the node that takes it looks for the first run first.
    work.claim = out.nonce;
    work.retry = true;
    queued = cluster_.Queue(pool, tenant, route.key, out.nonce, work.Encode());
  }
  out.queued = queued;
  co_return out;
}

// Waits for the outcome: nullopt once it is taken, else the reply for a deadline passed or a
// client gone (with a key, a retry elsewhere may attach within kCancelGrace).
net::awaitable<std::optional<HttpReply>> ClusterEntry::AwaitOutcome(
    std::shared_ptr<Request> route, std::shared_ptr<pool::CancelFlag> cancel) {
  auto last_check = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> hung_up;
  const std::string& key = route->key;
  while (!route->Taken()) {
    const auto now = std::chrono::steady_clock::now();
    if (now > route->deadline) {
      co_return EndingReply(RequestEnding::kTimedOut,
                            "no node of the cluster answered within the request's timeout (" +
                                std::to_string(route->admitted->timeout_seconds) + " s)",
                            route->request_id);
    }
    if (cancel->raised()) {
      // Without a key nobody can come back for it; with one, a retry elsewhere may attach.
      if (!route->idempotency_key) {
        cluster_.Tell("cancel", key);
        co_return EndingReply(RequestEnding::kCancelled, "the client hung up", route->request_id);
      }
      if (!hung_up) hung_up = now;
      if (now - *hung_up > kCancelGrace) {
        if (!AttachedSince(key, *hung_up)) cluster_.Tell("cancel", key);
        co_return EndingReply(RequestEnding::kCancelled, "the client hung up", route->request_id);
      }
    }
    // A quorum lost for as long as a queue is retried: nobody can store the outcome.
    if (auto failing = cluster_.WritesFailingSince();
        failing && now - *failing > cluster::kQueueRetryFor) {
      co_return EndingReply(
          RequestEnding::kClusterUnavailable,
          "the cluster's NATS servers have taken none of this node's writes for " +
              std::to_string(cluster::kQueueRetryFor.count()) +
              " s (no quorum, or out of reach) while this request was queued or running: " +
              (route->idempotency_key
                   ? "send it again with the same Idempotency-Key to get its outcome"
                   : "it may still run; sent again without an Idempotency-Key, it may run twice"),
          route->request_id);
    }
    if (now - last_check > kStoreCheck) {  // makes up for an announcement lost to a reconnect
      last_check = now;
      auto checking = ClusterCall(services_, [this, route] {
        auto stored = cluster_.Outcome(route->key);
        if (stored.ok() && stored->has_value()) route->Deliver(std::move(**stored), services_.io);
      });
      co_await std::move(checking);
      continue;
    }
    route->wake->expires_after(kPoll);
    co_await route->wake->async_wait(net::as_tuple(net::use_awaitable));
  }
  co_return std::nullopt;
}

// The answer from the outcome record: inline, or a body the executing node pushed here (else
// fetched from a holder). On the parse pool.
net::awaitable<HttpReply> ClusterEntry::AnswerFromOutcome(std::string record_text,
                                                          std::string request_id) {
  auto unreadable = [&](const Status& status) {
    return EndingReply(RequestEnding::kInternal,
                       "the cluster's outcome could not be read: " + status.message(), request_id);
  };
  auto record = cluster::OutcomeRecord::Decode(record_text);
  if (!record.ok()) co_return unreadable(record.status());
  store::BlobPtr body;
  if (const auto& blob = record->body_blob) {
    body = services_.blobs.memory().Get(blob->sha256);
    if (body == nullptr) {
      auto fetching = ClusterCall(services_, [&]() -> store::BlobPtr {
        for (const auto& holder : blob->holders) {
          auto fetched = services_.peers->Fetch(holder, blob->sha256);
          if (fetched.ok()) return *fetched;
        }
        return nullptr;
      });
      body = co_await std::move(fetching);
    }
  }
  auto reply = ReplyOf(std::move(*record), body, request_id);
  if (!reply.ok()) co_return unreadable(reply.status());
  co_return std::move(*reply);
}

net::awaitable<HttpReply> ClusterEntry::Route(std::shared_ptr<AdmittedRequest> admitted,
                                              std::string request_id,
                                              std::optional<std::string> idempotency_key,
                                              std::shared_ptr<pool::CancelFlag> cancel) {
  auto route = std::make_shared<Request>();
  route->key = ClusterKey(admitted->share.tenant, idempotency_key);
  route->nonce = NewUuid();
  route->deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(admitted->timeout_seconds * 1000)) +
      kDeadlineGrace;
  route->admitted = std::move(admitted);
  route->request_id = request_id;
  route->idempotency_key = std::move(idempotency_key);
  route->wake =
      std::make_shared<net::steady_timer>(services_.io, net::steady_timer::time_point::max());

  // Each try is whole (a second claim with our own nonce is ours: it re-subscribes and
  // re-publishes the same message id, which JetStream drops as a duplicate).
  Queued queued;
  const auto give_up = std::chrono::steady_clock::now() + cluster::kQueueRetryFor;
  for (auto pause = std::chrono::milliseconds(100);;
       pause = std::min(2 * pause, std::chrono::milliseconds(2000))) {
    auto queueing = net::co_spawn(*services_.cluster_calls, Queue(route), net::use_awaitable);
    queued = co_await std::move(queueing);
    if (!queued.refusal || !queued.retryable || std::chrono::steady_clock::now() > give_up ||
        cancel->raised()) {
      break;
    }
    route->wake->expires_after(pause);
    co_await route->wake->async_wait(net::as_tuple(net::use_awaitable));
  }
  if (queued.refusal) co_return std::move(*queued.refusal);
  if (std::optional<HttpReply> ended = co_await AwaitOutcome(route, cancel)) {
    co_return std::move(*ended);
  }
  // Draining the subscription waits a round trip to NATS: not on the answer's way.
  net::post(*services_.cluster_calls, [done = std::move(queued.listening)] {});
  auto answering = net::co_spawn(services_.cpu_pool, AnswerFromOutcome(*route->Taken(), request_id),
                                 net::use_awaitable);
  co_return co_await std::move(answering);
}

StatusOr<std::unique_ptr<ClusterEntry>> ClusterEntry::Start(Services& services,
                                                            cluster::EntrySide& cluster) {
  if (services.cluster_calls == nullptr)
    return InternalError("the cluster's entry needs its threads");
  std::unique_ptr<ClusterEntry> entry(new ClusterEntry(services, cluster));
  auto attach = cluster.Hear(
      "attach", [raw = entry.get()](std::string key) { raw->NoteAttached(std::move(key)); });
  if (!attach.ok()) return attach.status();
  entry->hear_attach_ = std::move(*attach);
  return entry;
}

void ClusterEntry::NoteAttached(std::string key) {
  std::lock_guard lock(attached_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (attached_.size() > 10000)
    std::erase_if(attached_,
                  [&](const auto& entry) { return now - entry.second > std::chrono::minutes(1); });
  attached_[std::move(key)] = now;
}

bool ClusterEntry::AttachedSince(const std::string& key,
                                 std::chrono::steady_clock::time_point since) {
  std::lock_guard lock(attached_mu_);
  auto it = attached_.find(key);
  return it != attached_.end() && it->second >= since;
}

}  // namespace kc::server
