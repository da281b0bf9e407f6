#include "cluster/node_registry.h"

#include <algorithm>

#include "base/utc_time.h"

namespace kc::cluster {

NodeRegistry::NodeRegistry(kvStore* bucket, std::string node_id, std::chrono::seconds heartbeat,
                           std::function<nlohmann::json()> describe)
    : bucket_(bucket),
      node_id_(std::move(node_id)),
      heartbeat_(heartbeat),
      describe_(std::move(describe)) {}

StatusOr<std::unique_ptr<NodeRegistry>> NodeRegistry::Join(
    NatsLink& link, std::string node_id, std::chrono::seconds heartbeat,
    std::function<nlohmann::json()> describe) {
  KC_ASSIGN_OR_RETURN(kvStore * bucket, link.Bucket(kBucket, 3 * heartbeat));
  std::unique_ptr<NodeRegistry> registry(
      new NodeRegistry(bucket, std::move(node_id), heartbeat, std::move(describe)));
  KC_RETURN_IF_ERROR(registry->Beat());
  registry->Refresh();
  registry->beater_ = std::thread([raw = registry.get()] { raw->BeatLoop(); });
  return registry;
}

NodeRegistry::~NodeRegistry() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (beater_.joinable()) beater_.join();
  kvStore_Delete(bucket_, node_id_.c_str());  // best effort: the TTL forgets it anyway
}

Status NodeRegistry::Beat() {
  nlohmann::json record = describe_();
  record["node_id"] = node_id_;
  record["beat_unix_ms"] = UnixMillisecondsNow();
  const std::string text = record.dump();
  uint64_t revision = 0;
  const natsStatus s =
      kvStore_Put(&revision, bucket_, node_id_.c_str(), text.data(), static_cast<int>(text.size()));
  if (s != NATS_OK) return UnavailableError("announcing this node to the cluster: " + NatsError(s));
  return Status::Ok();
}

void NodeRegistry::BeatLoop() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, heartbeat_, [&] { return stopping_; })) {
    lock.unlock();
    (void)Beat();  // a missed beat while NATS reconnects; the next one catches up
    Refresh();
    lock.lock();
  }
}

void NodeRegistry::Refresh() {
  auto nodes = View();
  if (!nodes.ok()) return;  // keeps the last view while NATS is away
  std::lock_guard lock(view_mu_);
  view_ = std::move(*nodes);
}

nlohmann::json NodeRegistry::Cached() const {
  std::lock_guard lock(view_mu_);
  return view_;
}

StatusOr<nlohmann::json> NodeRegistry::View() const {
  kvKeysList keys{};
  natsStatus s = kvStore_Keys(&keys, bucket_, nullptr);
  nlohmann::json nodes = nlohmann::json::array();
  if (s == NATS_NOT_FOUND) return nodes;  // no key at all
  if (s != NATS_OK) return UnavailableError("reading the cluster's nodes: " + NatsError(s));
  const int64_t now = UnixMillisecondsNow();
  for (int i = 0; i < keys.Count; ++i) {
    kvEntry* entry = nullptr;
    if (kvStore_Get(&entry, bucket_, keys.Keys[i]) != NATS_OK) continue;  // gone meanwhile
    nlohmann::json record = nlohmann::json::parse(
        kvEntry_ValueString(entry), kvEntry_ValueString(entry) + kvEntry_ValueLen(entry), nullptr,
        /*allow_exceptions=*/false);
    kvEntry_Destroy(entry);
    if (!record.is_object()) continue;  // not a node's record
    record["age_s"] = static_cast<double>(now - record.value("beat_unix_ms", now)) / 1e3;
    nodes.push_back(std::move(record));
  }
  kvKeysList_Destroy(&keys);
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.value("node_id", "") < b.value("node_id", "");
  });
  return nodes;
}

}  // namespace kc::cluster
