// ExecuteRoute and ClusterEntry on Services of the test's own: real parts (event log, blob
// store, quotas, a pool that never starts a worker), no NATS and no GPU. The cluster is an
// in-memory EntrySide that answers what is queued.
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cluster/entry_side.h"
#include "cluster/outcome_record.h"
#include "cluster/work_message.h"
#include "pool/worker_pool.h"
#include "server/clustering/cluster_entry.h"
#include "server/core/server_config.h"
#include "server/core/services.h"
#include "server/execute/execute_route.h"
#include "server/status/event_log.h"
#include "server/status/metrics.h"
#include "server/status/request_ring.h"
#include "server/status/status_history.h"
#include "server/tenancy/access_control.h"
#include "server/tenancy/tenant_quotas.h"
#include "store/blob_store.h"

namespace kc::server {
namespace {

// What a route may use, each part real and the test's own.
struct TestParts {
  explicit TestParts(Device device) {
    config.device = device;
    pool.BeginShutdown();  // never runs anything: a submitted job is refused as saturated
  }
  ServerConfig config;
  ServerState state;
  EventLog events{"", false, false};
  Metrics metrics{events};
  store::BlobStore blobs{store::BlobStoreOptions{.memory_capacity_bytes = 1 << 20}};
  pool::WorkerPool pool{pool::PoolOptions{}, metrics};
  TenantQuotas quotas{std::chrono::seconds(60)};
  AccessControl access;
  RequestRing requests;
  StatusHistory history;
  net::io_context io{1};
  net::thread_pool cpu_pool{1};
  net::thread_pool cluster_calls{2};
  std::string node_url = "http://127.0.0.1:9";
  Services services{.config = config,
                    .state = state,
                    .events = events,
                    .metrics = metrics,
                    .blobs = blobs,
                    .pool = pool,
                    .quotas = quotas,
                    .access = access,
                    .requests = requests,
                    .history = history,
                    .io = io,
                    .cpu_pool = cpu_pool,
                    .node_url = node_url};
};

// Runs `route` on the parts' event loop until it answers.
HttpReply Answer(TestParts& parts, net::awaitable<HttpReply> route) {
  auto answer = net::co_spawn(parts.io, std::move(route), net::use_future);
  parts.io.run();
  parts.io.restart();
  return answer.get();
}

const std::string kBoundary = "b0und";

// An /execute body holding the program only.
StatusOr<std::unique_ptr<ExecuteIngest>> BodyOf(const std::string& program) {
  const std::string body = "--" + kBoundary +
                           "\r\nContent-Disposition: form-data; name=\"program\"\r\n"
                           "Content-Type: application/json\r\n\r\n" +
                           program + "\r\n--" + kBoundary + "--\r\n";
  KC_ASSIGN_OR_RETURN(auto ingest,
                      ExecuteIngest::Start("multipart/form-data; boundary=" + kBoundary));
  KC_RETURN_IF_ERROR(ingest->Take(0, body));
  ingest->HashTaken(0);
  KC_RETURN_IF_ERROR(ingest->StoreTaken(0));
  return ingest;
}

constexpr std::string_view kReturnsOne =
    R"({"instructions":[{"op":"upload","id":"m","kind":"module","source":"one = 1"},)"
    R"({"op":"return","key":"m","value":{"$ref":"m"}}]})";

ExecuteArrival ArrivalOf(std::string request_id) {
  return {.request_id = std::move(request_id), .client = "127.0.0.1:1", .received = Clock::now()};
}

TEST(ExecuteRoute, AServerShuttingDownAnswers503AndCountsTheRequest) {
  TestParts parts(Device::kCpu);
  parts.state.shutting_down = true;
  ExecuteRoute route(parts.services, nullptr);
  HttpReply reply = Answer(parts, route.Handle(ArrivalOf("r1"), BodyOf(std::string(kReturnsOne)),
                                               std::make_shared<pool::CancelFlag>()));
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(reply.ending, RequestEnding::kShuttingDown);
  EXPECT_EQ(parts.requests.finished(), 1u);
  EXPECT_EQ(parts.state.in_flight, 0);
}

TEST(ExecuteRoute, AProgramNamingABlobTheStoreLacksIsACacheMiss) {
  TestParts parts(Device::kCpu);
  ExecuteRoute route(parts.services, nullptr);
  const std::string sha(64, 'a');
  const std::string program =
      R"({"instructions":[{"op":"upload","id":"b","kind":"bytes","blob":")" + sha +
      R"("},{"op":"return","key":"b","value":{"$ref":"b"}}]})";
  HttpReply reply = Answer(
      parts, route.Handle(ArrivalOf("r2"), BodyOf(program), std::make_shared<pool::CancelFlag>()));
  EXPECT_EQ(reply.ending, RequestEnding::kCacheMiss);
  EXPECT_NE(reply.body.find(sha), std::string::npos) << reply.body;
}

TEST(ExecuteRoute, GpusAskedOfACpuServerAreRefusedNamingTheOption) {
  TestParts parts(Device::kCpu);
  ExecuteRoute route(parts.services, nullptr);
  const std::string program = R"({"options":{"gpu_count":1},)" + std::string(kReturnsOne).substr(1);
  HttpReply reply = Answer(
      parts, route.Handle(ArrivalOf("r3"), BodyOf(program), std::make_shared<pool::CancelFlag>()));
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.error_message.find("options.gpu_count"), std::string::npos)
      << reply.error_message;
}

TEST(ExecuteRoute, AnAdmittedRequestOnASeatlessPoolIsSaturated) {
  TestParts parts(Device::kCpu);
  ExecuteRoute route(parts.services, nullptr);
  HttpReply reply = Answer(parts, route.Handle(ArrivalOf("r4"), BodyOf(std::string(kReturnsOne)),
                                               std::make_shared<pool::CancelFlag>()));
  EXPECT_EQ(reply.ending, RequestEnding::kSaturated);
}

struct FakeListening : cluster::Listening {};

// The cluster as an entry node sees it, in memory: what is queued is kept, and a wake answers
// it with `answer` (when set) through the outcome's subscription.
class FakeCluster : public cluster::EntrySide {
 public:
  const std::string& node_id() const override { return id_; }
  StatusOr<std::string> ChoosePool(bool needs_gpu, const nlohmann::json&,
                                   const cluster::GpuNeed&) const override {
    return std::string(needs_gpu ? "gpu/sm_90" : "cpu");
  }
  StatusOr<cluster::Claim> Claim(const std::string&, const std::string&,
                                 const std::string& nonce) override {
    return cluster::Claim{claim_result, nonce};
  }
  Status Queue(const std::string& pool, const std::string&, const std::string&, const std::string&,
               std::string_view payload) override {
    std::lock_guard lock(mu_);
    ++queue_calls;
    if (unavailable_queues > 0) {
      --unavailable_queues;
      return UnavailableError("NATS is away");
    }
    KC_ASSIGN_OR_RETURN(cluster::WorkMessage work, cluster::WorkMessage::Decode(payload));
    queued.push_back(std::move(work));
    pools.push_back(pool);
    return Status::Ok();
  }
  void Wake(const std::string&, const std::string&, const std::string&) override {
    std::function<void(std::string)> deliver;
    {
      std::lock_guard lock(mu_);
      deliver = on_outcome_;
    }
    if (answer && deliver) deliver(*answer);
  }
  std::optional<std::chrono::steady_clock::time_point> WritesFailingSince() const override {
    return std::nullopt;
  }
  StatusOr<std::optional<std::string>> Outcome(const std::string&) override {
    return std::optional<std::string>();
  }
  StatusOr<std::optional<std::string>> StoredOutcome(const std::string&) override {
    return std::optional<std::string>();
  }
  StatusOr<std::unique_ptr<cluster::Listening>> Await(
      const std::string&, std::function<void(std::string)> on_outcome) override {
    std::lock_guard lock(mu_);
    on_outcome_ = std::move(on_outcome);
    return std::unique_ptr<cluster::Listening>(new FakeListening);
  }
  void Tell(const std::string& what, const std::string& key) override {
    std::lock_guard lock(mu_);
    told.emplace_back(what, key);
  }
  StatusOr<std::unique_ptr<cluster::Listening>> Hear(const std::string&,
                                                     std::function<void(std::string)>) override {
    return std::unique_ptr<cluster::Listening>(new FakeListening);
  }

  cluster::ClaimResult claim_result = cluster::ClaimResult::kNew;
  int unavailable_queues = 0;
  std::optional<std::string> answer;
  int queue_calls = 0;
  std::vector<cluster::WorkMessage> queued;
  std::vector<std::string> pools;
  std::vector<std::pair<std::string, std::string>> told;

 private:
  const std::string id_ = "fake-node";
  std::mutex mu_;
  std::function<void(std::string)> on_outcome_;
};

std::string OutcomeSaying(std::string body) {
  cluster::OutcomeRecord record;
  record.status = 200;
  record.content_type = "application/json";
  record.executed_by = "other-node";
  record.body = std::move(body);
  return record.Encode();
}

struct ClusterParts : TestParts {
  ClusterParts() : TestParts(Device::kCpu) {
    services.cluster_calls = &cluster_calls;
    auto started = ClusterEntry::Start(services, cluster);
    entry = std::move(*started);
  }
  FakeCluster cluster;
  std::unique_ptr<ClusterEntry> entry;
};

TEST(ClusterEntry, ARequestIsQueuedForItsPoolAndAnsweredFromTheStoredOutcome) {
  ClusterParts parts;
  parts.cluster.answer = OutcomeSaying(R"({"status":"COMPLETED"})");
  ExecuteRoute route(parts.services, parts.entry.get());
  HttpReply reply = Answer(parts, route.Handle(ArrivalOf("c1"), BodyOf(std::string(kReturnsOne)),
                                               std::make_shared<pool::CancelFlag>()));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, R"({"status":"COMPLETED"})");
  ASSERT_EQ(parts.cluster.queued.size(), 1u);
  const cluster::WorkMessage& work = parts.cluster.queued[0];
  EXPECT_EQ(parts.cluster.pools[0], "cpu");  // no run needs a GPU
  EXPECT_EQ(work.request_id, "c1");
  EXPECT_EQ(work.entry_node, "fake-node");
  EXPECT_EQ(work.entry_url, parts.node_url);
  EXPECT_EQ(work.program, std::string(kReturnsOne));
  EXPECT_FALSE(work.claim.has_value());  // no Idempotency-Key, no claim
}

TEST(ClusterEntry, QueueingIsTriedAgainWhileNatsIsAway) {
  ClusterParts parts;
  parts.cluster.unavailable_queues = 2;
  parts.cluster.answer = OutcomeSaying("{}");
  ExecuteRoute route(parts.services, parts.entry.get());
  HttpReply reply = Answer(parts, route.Handle(ArrivalOf("c2"), BodyOf(std::string(kReturnsOne)),
                                               std::make_shared<pool::CancelFlag>()));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(parts.cluster.queue_calls, 3);
}

// A later try publishes the message an earlier one may have queued, run and seen acknowledged,
// which a restarted JetStream no longer drops as a duplicate: marked, it runs only after a look
// for the first run's outcome (work_message.h `retry`). A first try is not marked.
TEST(ClusterEntry, AKeyedRequestQueuedOnALaterTryIsMarkedARetry) {
  for (int failed_tries : {0, 1}) {
    ClusterParts parts;
    parts.cluster.unavailable_queues = failed_tries;
    parts.cluster.answer = OutcomeSaying("{}");
    ExecuteRoute route(parts.services, parts.entry.get());
    ExecuteArrival arrival = ArrivalOf("c5");
    arrival.idempotency_key = "key-2";
    HttpReply reply =
        Answer(parts, route.Handle(std::move(arrival), BodyOf(std::string(kReturnsOne)),
                                   std::make_shared<pool::CancelFlag>()));
    EXPECT_EQ(reply.status, 200);
    ASSERT_EQ(parts.cluster.queued.size(), 1u);
    EXPECT_EQ(parts.cluster.queued[0].retry, failed_tries > 0) << failed_tries;
  }
}

TEST(ClusterEntry, AnIdempotencyKeyBoundToAnotherProgramIsAConflict) {
  ClusterParts parts;
  parts.cluster.claim_result = cluster::ClaimResult::kOtherProgram;
  ExecuteRoute route(parts.services, parts.entry.get());
  ExecuteArrival arrival = ArrivalOf("c3");
  arrival.idempotency_key = "key-1";
  HttpReply reply = Answer(parts, route.Handle(std::move(arrival), BodyOf(std::string(kReturnsOne)),
                                               std::make_shared<pool::CancelFlag>()));
  EXPECT_EQ(reply.status, 409);
  EXPECT_EQ(reply.ending, RequestEnding::kConflict);
}

TEST(ClusterEntry, AClientThatHangsUpWithoutAKeyCancelsItsRunEverywhere) {
  ClusterParts parts;  // no answer ever comes
  ExecuteRoute route(parts.services, parts.entry.get());
  auto cancel = std::make_shared<pool::CancelFlag>();
  cancel->Raise();
  HttpReply reply =
      Answer(parts, route.Handle(ArrivalOf("c4"), BodyOf(std::string(kReturnsOne)), cancel));
  EXPECT_EQ(reply.ending, RequestEnding::kCancelled);
  ASSERT_EQ(parts.cluster.told.size(), 1u);
  EXPECT_EQ(parts.cluster.told[0].first, "cancel");
  ASSERT_EQ(parts.cluster.queued.size(), 1u);
  EXPECT_EQ(parts.cluster.told[0].second, parts.cluster.queued[0].key);
}

}  // namespace
}  // namespace kc::server
