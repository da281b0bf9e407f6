// POST /execute on a node of a cluster (docs/cluster.md "Routing work"): the request, already
// parsed and its blobs in this node's store, is queued for the pool that can run it, and this
// node answers with the first stored outcome. The key names the request across nodes: the
// client's Idempotency-Key under its tenant (so a retry on any node finds the run) or a random
// one.
#include <chrono>

#include <boost/asio.hpp>
#include <boost/asio/experimental/parallel_group.hpp>

#include "base/clock.h"
#include "base/rounded.h"
#include "base/sha256.h"
#include "base/shared_bytes.h"
#include "base/utc_time.h"
#include "cluster/outcome_record.h"
#include "cluster/peer_client.h"
#include "cluster/pool_view.h"
#include "cluster/work_message.h"
#include "protocol/cuda_code.h"
#include "server/admitted_request.h"
#include "server/app.h"
#include "server/outcome_record.h"
#include "server/request_id.h"

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

net::awaitable<HttpReply> App::RouteThroughCluster(std::shared_ptr<AdmittedRequest> admitted,
                                                   std::string request_id,
                                                   std::optional<std::string> idempotency_key,
                                                   std::shared_ptr<pool::CancelFlag> cancel) {
  const std::string key = ClusterKey(admitted->share.tenant, idempotency_key);
  // Names this request's run under the key's claim (cluster_types.h Claim).
  const std::string nonce = NewUuid();
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(admitted->timeout_seconds * 1000)) +
      kDeadlineGrace;

  // The announcement may come on a NATS thread at any time from here on.
  struct Waiting {
    std::mutex mu;
    std::optional<std::string> record;  // mu
  };
  auto waiting = std::make_shared<Waiting>();
  auto wake = std::make_shared<net::steady_timer>(io_, net::steady_timer::time_point::max());
  auto on_outcome = [this, waiting, wake](std::string record) {
    {
      std::lock_guard lock(waiting->mu);
      if (waiting->record) return;
      waiting->record = std::move(record);
    }
    net::post(io_, [wake] { wake->expires_at(net::steady_timer::time_point::min()); });
  };

  // Blocking NATS calls: on the cluster-calls threads (App::ClusterCall).
  struct Queued {
    std::optional<HttpReply> refusal;
    bool retryable = false;  // the refusal is NATS being away for now
    std::unique_ptr<cluster::Listening> listening;
  };
  auto queue = [this, admitted, request_id, key, nonce, idempotency_key,
                on_outcome]() -> net::awaitable<Queued> {
    Queued out;
    const auto started = Clock::now();
    auto fail = [&](const Status& status) {
      out.refusal = EndingReply(EndingForStatus(status), status.message(), request_id);
      out.retryable = status.code() == StatusCode::kUnavailable;
      return std::move(out);
    };
    const auto& program = admitted->request.program;
    auto pool = cluster_->ChoosePool(NeedsGpu(program),
                                     pool_->describe().value("versions", nlohmann::json::object()),
                                     GpuNeedOf(*admitted));
    if (!pool.ok()) co_return fail(pool.status());
    const std::string program_hash = Sha256Hex(admitted->request.program_json);
    auto listening = cluster_->Await(key, on_outcome);
    if (!listening.ok()) co_return fail(listening.status());
    out.listening = std::move(*listening);
    cluster::WorkMessage work{
        .key = key,
        .request_id = request_id,
        .entry_node = cluster_->node_id(),
        .entry_url = node_url_,
        .deadline_unix_ms =
            UnixMillisecondsNow() + static_cast<int64_t>(admitted->timeout_seconds * 1000),
        .timeout_seconds = admitted->timeout_seconds,
        .output_limit_bytes = admitted->output_limit_bytes,
        .tenant = admitted->share.tenant,
        .weight = admitted->share.weight};
    if (idempotency_key) work.claim = nonce;
    work.queued_unix_us = UnixMicrosecondsNow();  // the executing node times the queue
    const std::string& program_json = admitted->request.program_json;
    if (program_json.size() <= cluster::kInlineProgramBytes) {
      work.program = program_json;
    } else {
      auto blob = store::Blob::FromBytes(program_hash, program_json);
      if (!blob.ok()) co_return fail(blob.status());
      blobs_.Add(*blob);
      work.program_sha256 = program_hash;
    }
    const std::string tenant = cluster::TenantSubjectToken(work.tenant);
    // A key a client may come back with is claimed (a random one is new by making). The claim
    // is written beside the message, not before it (two replicated writes at once instead of
    // in a row): the executing node runs a message only under a claim that carries its nonce
    // (cluster_executor.cc), so the message of a request whose claim another holds is dropped
    // unrun.
    Status queued;
    std::string claim_nonce;  // the nonce of the run queued under the key's claim
    if (!idempotency_key) {
      queued = cluster_->Queue(*pool, tenant, key, "", work.Encode());
    } else {
      // Each begins with a post: spawned from a thread of the pool, it would otherwise run at
      // once, inline, and the other would start only after its blocking call.
      std::optional<StatusOr<cluster::Claim>> claim;
      auto [order, claim_threw, queue_threw] =
          co_await net::experimental::make_parallel_group(
              net::co_spawn(
                  *cluster_calls_,
                  [&]() -> net::awaitable<void> {
                    co_await net::post(*cluster_calls_, net::use_awaitable);
                    claim = cluster_->Claim(key, program_hash, nonce);
                  },
                  net::deferred),
              net::co_spawn(
                  *cluster_calls_,
                  [&]() -> net::awaitable<void> {
                    co_await net::post(*cluster_calls_, net::use_awaitable);
                    queued = cluster_->Queue(*pool, tenant, key, nonce, work.Encode());
                  },
                  net::deferred))
              .async_wait(net::experimental::wait_for_all(), net::use_awaitable);
      for (const std::exception_ptr& threw : {claim_threw, queue_threw})
        if (threw) std::rethrow_exception(threw);  // as it would have without the group
      if (!claim->ok()) co_return fail(claim->status());
      if ((*claim)->result == cluster::ClaimResult::kOtherProgram) {
        out.refusal = EndingReply(RequestEnding::kConflict,
                                  "Idempotency-Key is already bound to another program (or "
                                  "other options): a retry must send the same program",
                                  request_id);
        co_return out;
      }
      claim_nonce = (*claim)->nonce;
      if (claim_nonce != nonce) {
        // A retry: the run queued under the first claim is the answer, wherever it runs.
        cluster_->Tell("attach", key);  // the first entry node must not cancel it
        auto stored = cluster_->Outcome(key);
        if (stored.ok() && stored->has_value()) {
          on_outcome(std::move(**stored));
          co_return out;
        }
        // Its message once more (JetStream drops it as a duplicate), in case the first entry
        // node died before queueing it.
        work.claim = claim_nonce;
        queued = cluster_->Queue(*pool, tenant, key, claim_nonce, work.Encode());
      }
    }
    if (!queued.ok()) co_return fail(queued);
    // Sent only now that the claim holds, so the node it wakes need not read the claim.
    cluster_->Wake(*pool, tenant, claim_nonce);
    events_.Emit(EventLevel::kInfo, "cluster_request_queued",
                 {{"request_id", request_id},
                  {"key", key},
                  {"pool", *pool},
                  {"ms", Rounded(MillisecondsSince(started))}});
    co_return out;
  };
  // Each try is whole (a second claim with our own nonce is ours: it re-subscribes and
  // re-publishes the same message id, which JetStream drops as a duplicate).
  Queued queued;
  const auto give_up = std::chrono::steady_clock::now() + cluster::kQueueRetryFor;
  for (auto pause = std::chrono::milliseconds(100);;
       pause = std::min(2 * pause, std::chrono::milliseconds(2000))) {
    auto queueing = net::co_spawn(*cluster_calls_, queue, net::use_awaitable);
    queued = co_await std::move(queueing);
    if (!queued.refusal || !queued.retryable || std::chrono::steady_clock::now() > give_up ||
        cancel->raised()) {
      break;
    }
    wake->expires_after(pause);
    co_await wake->async_wait(net::as_tuple(net::use_awaitable));
  }
  if (queued.refusal) co_return std::move(*queued.refusal);

  auto taken = [&]() -> std::optional<std::string> {
    std::lock_guard lock(waiting->mu);
    return waiting->record;
  };
  auto last_check = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> hung_up;
  while (!taken()) {
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      co_return EndingReply(RequestEnding::kTimedOut,
                            "no node of the cluster answered within the request's timeout (" +
                                std::to_string(admitted->timeout_seconds) + " s)",
                            request_id);
    }
    if (cancel->raised()) {
      // Without a key nobody can come back for it; with one, a retry elsewhere may attach.
      if (!idempotency_key) {
        cluster_->Tell("cancel", key);
        co_return EndingReply(RequestEnding::kCancelled, "the client hung up", request_id);
      }
      if (!hung_up) hung_up = now;
      if (now - *hung_up > kCancelGrace) {
        if (!AttachedSince(key, *hung_up)) cluster_->Tell("cancel", key);
        co_return EndingReply(RequestEnding::kCancelled, "the client hung up", request_id);
      }
    }
    if (now - last_check > kStoreCheck) {
      last_check = now;
      auto checking = ClusterCall([this, key, on_outcome] {
        auto stored = cluster_->Outcome(key);
        if (stored.ok() && stored->has_value()) on_outcome(std::move(**stored));
      });
      co_await std::move(checking);
      continue;
    }
    wake->expires_after(kPoll);
    co_await wake->async_wait(net::as_tuple(net::use_awaitable));
  }

  // Draining the subscription waits a round trip to NATS: not on the answer's way.
  net::post(*cluster_calls_, [done = std::move(queued.listening)] {});
  // The answer: inline, or a body the executing node pushed here (else fetched from a holder).
  auto answer = [this, record_text = *taken(), request_id]() -> net::awaitable<HttpReply> {
    auto unreadable = [&](const Status& status) {
      return EndingReply(RequestEnding::kInternal,
                         "the cluster's outcome could not be read: " + status.message(),
                         request_id);
    };
    auto record = cluster::OutcomeRecord::Decode(record_text);
    if (!record.ok()) co_return unreadable(record.status());
    store::BlobPtr body;
    if (const auto& blob = record->body_blob) {
      body = blobs_.memory().Get(blob->sha256);
      if (body == nullptr) {
        auto fetching = ClusterCall([&]() -> store::BlobPtr {
          for (const auto& holder : blob->holders) {
            auto fetched = peers_->Fetch(holder, blob->sha256);
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
  };
  auto answering = net::co_spawn(cpu_pool_, std::move(answer), net::use_awaitable);
  co_return co_await std::move(answering);
}

}  // namespace kc::server
