#include "cluster/cluster_node.h"

#include "cluster/broker_sync.h"
#include "cluster/running_keys.h"

#if KCORAL_WITH_CLUSTER
#include "cluster/nats_link.h"
#include "cluster/node_registry.h"
#include "cluster/outcome_store.h"
#include "cluster/pool_view.h"
#include "cluster/usage_ledger.h"
#include "cluster/work_queue.h"
#endif

namespace kc::cluster {

#if KCORAL_WITH_CLUSTER

struct ClusterNode::Parts {
  ClusterOptions options;
  RunningKeys running;  // listed in the record: outlives the registry that reads it
  std::unique_ptr<NatsLink> link;
  // Declared after link: destroyed before it.
  std::unique_ptr<NodeRegistry> registry;
  std::unique_ptr<WorkQueue> work;
  std::unique_ptr<OutcomeStore> outcomes;
  std::unique_ptr<UsageLedger> usage;
  std::unique_ptr<BrokerSync> broker_sync;
};

namespace {
// Brokers change settings only on a restart: a minute's lag in noticing one is enough.
constexpr auto kBrokerSyncEvery = std::chrono::seconds(60);
}  // namespace

StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Join(const ClusterOptions& options,
                                                         std::string node_id,
                                                         std::function<nlohmann::json()> describe,
                                                         BrokerWarning on_broker_warning) {
  if (options.secret.empty()) {
    return FailedPreconditionError(
        "a cluster needs a shared secret for its nodes' requests to each other: set "
        "KCORAL_CLUSTER_SECRET or --cluster-secret-file (the same on every node)");
  }
  auto parts = std::make_unique<Parts>();
  parts->options = options;
  KC_ASSIGN_OR_RETURN(parts->link, NatsLink::Connect(parts->options, "kcoral " + node_id));
  KC_ASSIGN_OR_RETURN(parts->work,
                      WorkQueue::Open(*parts->link, {.ack_wait = options.ack_wait,
                                                     .idle_consumer = options.idle_tenant}));
  KC_ASSIGN_OR_RETURN(parts->outcomes, OutcomeStore::Open(*parts->link, options.outcome_ttl));
  KC_ASSIGN_OR_RETURN(parts->usage, UsageLedger::Open(*parts->link, options.usage_ttl));
  auto record = [describe = std::move(describe), running = &parts->running] {
    nlohmann::json record = describe();
    record["running"] = running->List();
    return record;
  };
  KC_ASSIGN_OR_RETURN(parts->registry,
                      NodeRegistry::Join(*parts->link, std::move(node_id), options.heartbeat,
                                         options.run_lease, std::move(record)));
  parts->broker_sync = std::make_unique<BrokerSync>(options.nats_monitors, options.allow_lazy_fsync,
                                                    kBrokerSyncEvery, std::move(on_broker_warning));
  return std::unique_ptr<ClusterNode>(new ClusterNode(std::move(parts)));
}

nlohmann::json ClusterNode::Describe() const {
  const auto view = parts_->registry->Cached();
  return {{"servers", parts_->options.servers},
          {"connected_url", parts_->link->ConnectedUrl()},
          {"connected", parts_->link->connected()},
          {"node_id", parts_->registry->node_id()},
          {"broker_sync", parts_->broker_sync->Report()},
          {"pools", view->pools},
          {"nodes", view->nodes}};
}

std::shared_ptr<const ClusterView> ClusterNode::View() const {
  return parts_->registry->Cached();
}

std::optional<std::chrono::steady_clock::time_point> ClusterNode::WritesFailingSince() const {
  return parts_->registry->BeatsFailingSince();
}

const std::string& ClusterNode::node_id() const {
  return parts_->registry->node_id();
}

StatusOr<std::string> ClusterNode::ChoosePool(bool needs_gpu, const nlohmann::json& own_versions,
                                              const GpuNeed& need) const {
  return cluster::ChoosePool(parts_->registry->Cached()->pools, needs_gpu, own_versions, need);
}

StatusOr<Claim> ClusterNode::Claim(const std::string& key, const std::string& hash,
                                   const std::string& nonce) {
  return parts_->outcomes->Claim(key, hash, nonce);
}

Status ClusterNode::Queue(const std::string& pool, const std::string& tenant,
                          const std::string& key, const std::string& nonce,
                          std::string_view payload) {
  return parts_->work->Publish(pool, tenant, nonce.empty() ? key : key + "." + nonce, payload);
}

void ClusterNode::Wake(const std::string& pool, const std::string& tenant,
                       const std::string& claim_nonce) {
  parts_->work->Wake(pool, tenant, claim_nonce);
}

bool ClusterNode::TakeConfirmedClaim(const std::string& nonce, std::chrono::microseconds wait) {
  return parts_->work->TakeConfirmedClaim(nonce, wait);
}

StatusOr<std::optional<std::string>> ClusterNode::ClaimNonce(const std::string& key) {
  return parts_->outcomes->ClaimNonce(key);
}

StatusOr<std::optional<std::string>> ClusterNode::Outcome(const std::string& key) {
  return parts_->outcomes->Get(key);
}

StatusOr<std::optional<std::string>> ClusterNode::StoredOutcome(const std::string& key) {
  return parts_->outcomes->GetFromLeader(key);
}

StatusOr<std::unique_ptr<Listening>> ClusterNode::Await(
    const std::string& key, std::function<void(std::string)> on_outcome) {
  KC_ASSIGN_OR_RETURN(auto sub, parts_->outcomes->Await(key, std::move(on_outcome)));
  return std::unique_ptr<Listening>(std::move(sub));
}

Status ClusterNode::Serve(const std::string& pool) {
  return parts_->work->Serve(pool);
}

StatusOr<std::unique_ptr<WorkItem>> ClusterNode::NextWork(
    std::chrono::milliseconds wait, const std::function<double(const std::string&)>& rank) {
  KC_ASSIGN_OR_RETURN(auto delivery, parts_->work->Next(wait, rank));
  return std::unique_ptr<WorkItem>(std::move(delivery));
}

StatusOr<bool> ClusterNode::StoreOutcome(const std::string& key, const std::string& record) {
  return parts_->outcomes->Put(key, record);
}

void ClusterNode::AnswerOnce(const std::string& key, const std::string& record) {
  parts_->outcomes->Release(key);
  parts_->outcomes->Announce(key, record);
}

int ClusterNode::max_runs() const {
  return parts_->work->options().max_runs;
}

bool ClusterNode::HoldRun(const std::string& key) {
  return parts_->running.Hold(key);
}

void ClusterNode::ReleaseRun(const std::string& key) {
  parts_->running.Release(key);
}

std::optional<RunHolder> ClusterNode::HolderOf(const std::string& key,
                                               const std::string& pool) const {
  return parts_->registry->HolderOf(key, pool);
}

nlohmann::json ClusterNode::DescribeHolders(const std::string& key) const {
  return parts_->registry->DescribeHolders(key);
}

void ClusterNode::Tell(const std::string& what, const std::string& key) {
  parts_->outcomes->Tell(what, key);
}

StatusOr<std::unique_ptr<Listening>> ClusterNode::Hear(const std::string& what,
                                                       std::function<void(std::string)> on_key) {
  KC_ASSIGN_OR_RETURN(auto sub, parts_->outcomes->Hear(what, std::move(on_key)));
  return std::unique_ptr<Listening>(std::move(sub));
}

Status ClusterNode::AddUsage(const std::string& tenant, int64_t window, const UsageSums& used) {
  return parts_->usage->Add(tenant, window, used);
}

StatusOr<UsageSums> ClusterNode::Usage(const std::string& tenant, int64_t window) const {
  return parts_->usage->Sums(tenant, window);
}

#else  // built without the NATS client

struct ClusterNode::Parts {
  ClusterOptions options;
  std::string node_id;
};

StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Join(const ClusterOptions&, std::string,
                                                         std::function<nlohmann::json()>,
                                                         BrokerWarning) {
  return FailedPreconditionError(
      "this kcoral-server was built without the NATS client (libnats-dev), so it cannot "
      "join a cluster: install libnats-dev and rebuild, or leave out --cluster");
}

// Never reached: Join never makes a node in this build.
namespace {
Status NoCluster() {
  return FailedPreconditionError("built without the NATS client");
}
}  // namespace
nlohmann::json ClusterNode::Describe() const {
  return nullptr;
}
std::shared_ptr<const ClusterView> ClusterNode::View() const {
  return std::make_shared<ClusterView>();
}
std::optional<std::chrono::steady_clock::time_point> ClusterNode::WritesFailingSince() const {
  return std::nullopt;
}
const std::string& ClusterNode::node_id() const {
  return parts_->node_id;
}
StatusOr<std::string> ClusterNode::ChoosePool(bool, const nlohmann::json&, const GpuNeed&) const {
  return NoCluster();
}
StatusOr<Claim> ClusterNode::Claim(const std::string&, const std::string&, const std::string&) {
  return NoCluster();
}
Status ClusterNode::Queue(const std::string&, const std::string&, const std::string&,
                          const std::string&, std::string_view) {
  return NoCluster();
}
void ClusterNode::Wake(const std::string&, const std::string&, const std::string&) {}
bool ClusterNode::TakeConfirmedClaim(const std::string&, std::chrono::microseconds) {
  return false;
}
StatusOr<std::optional<std::string>> ClusterNode::ClaimNonce(const std::string&) {
  return NoCluster();
}
StatusOr<std::optional<std::string>> ClusterNode::Outcome(const std::string&) {
  return NoCluster();
}
StatusOr<std::unique_ptr<Listening>> ClusterNode::Await(const std::string&,
                                                        std::function<void(std::string)>) {
  return NoCluster();
}
Status ClusterNode::Serve(const std::string&) {
  return NoCluster();
}
StatusOr<std::unique_ptr<WorkItem>> ClusterNode::NextWork(
    std::chrono::milliseconds, const std::function<double(const std::string&)>&) {
  return NoCluster();
}
StatusOr<bool> ClusterNode::StoreOutcome(const std::string&, const std::string&) {
  return NoCluster();
}
StatusOr<std::optional<std::string>> ClusterNode::StoredOutcome(const std::string&) {
  return NoCluster();
}
void ClusterNode::AnswerOnce(const std::string&, const std::string&) {}
int ClusterNode::max_runs() const {
  return 0;
}
bool ClusterNode::HoldRun(const std::string&) {
  return true;
}
void ClusterNode::ReleaseRun(const std::string&) {}
std::optional<RunHolder> ClusterNode::HolderOf(const std::string&, const std::string&) const {
  return std::nullopt;
}
nlohmann::json ClusterNode::DescribeHolders(const std::string&) const {
  return nlohmann::json::array();
}
void ClusterNode::Tell(const std::string&, const std::string&) {}
Status ClusterNode::AddUsage(const std::string&, int64_t, const UsageSums&) {
  return NoCluster();
}
StatusOr<UsageSums> ClusterNode::Usage(const std::string&, int64_t) const {
  return NoCluster();
}
StatusOr<std::unique_ptr<Listening>> ClusterNode::Hear(const std::string&,
                                                       std::function<void(std::string)>) {
  return NoCluster();
}

#endif

const ClusterOptions& ClusterNode::options() const {
  return parts_->options;
}

ClusterNode::ClusterNode(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
ClusterNode::~ClusterNode() = default;

}  // namespace kc::cluster
