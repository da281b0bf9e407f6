#include "cluster/node_registry.h"

#include <algorithm>
#include <optional>

#include "base/utc_time.h"

namespace kc::cluster {

NodeRegistry::NodeRegistry(kvStore* bucket, std::string node_id, std::chrono::seconds heartbeat,
                           std::chrono::seconds run_lease, std::function<nlohmann::json()> describe)
    : bucket_(bucket),
      node_id_(std::move(node_id)),
      heartbeat_(heartbeat),
      describe_(std::move(describe)),
      holders_(run_lease, 2 * heartbeat) {}

StatusOr<std::unique_ptr<NodeRegistry>> NodeRegistry::Join(
    NatsLink& link, std::string node_id, std::chrono::seconds heartbeat,
    std::chrono::seconds run_lease, std::function<nlohmann::json()> describe) {
  KC_ASSIGN_OR_RETURN(kvStore * bucket, link.Bucket(kBucket, 3 * heartbeat));
  std::unique_ptr<NodeRegistry> registry(
      new NodeRegistry(bucket, std::move(node_id), heartbeat, run_lease, std::move(describe)));
  KC_RETURN_IF_ERROR(registry->Beat());
  natsStatus s = kvStore_WatchAll(&registry->watcher_, bucket, nullptr);
  if (s != NATS_OK) return UnavailableError("watching the cluster's nodes: " + NatsError(s));
  // The records there now, this node's among them, before Join returns: a null entry ends them.
  for (;;) {
    kvEntry* entry = nullptr;
    s = kvWatcher_Next(&entry, registry->watcher_, 5000);
    if (s != NATS_OK) return UnavailableError("reading the cluster's nodes: " + NatsError(s));
    if (entry == nullptr) break;
    registry->Heard(entry);
  }
  registry->watching_ = std::thread([raw = registry.get()] { raw->WatchLoop(); });
  registry->beater_ = std::thread([raw = registry.get()] { raw->BeatLoop(); });
  return registry;
}

NodeRegistry::~NodeRegistry() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (watcher_ != nullptr) (void)kvWatcher_Stop(watcher_);  // wakes the watch's wait
  }
  cv_.notify_all();
  if (beater_.joinable()) beater_.join();
  if (watching_.joinable()) watching_.join();
  if (watcher_ != nullptr) kvWatcher_Destroy(watcher_);
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
  std::optional<std::chrono::steady_clock::time_point> last_beat;  // written, when it began
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, heartbeat_, [&] { return stopping_; })) {
    lock.unlock();
    const auto beating = std::chrono::steady_clock::now();
    const bool beat = Beat().ok();  // a missed beat while NATS reconnects; the next catches up
    if (beat) {
      beats_failing_since_ = 0;
    } else if (beats_failing_since_ == 0) {
      beats_failing_since_ = beating.time_since_epoch().count();
    }
    bool deaf = false;
    {
      std::lock_guard view_lock(view_mu_);
      RebuildView();  // the silent ones leave
      // The last beat, written a heartbeat ago, never came back: the watch broke (its
      // consumer's server died, say) without a word.
      deaf = beat && last_beat && heard_self_ < *last_beat;
    }
    last_beat = beat ? std::optional(beating) : std::nullopt;
    lock.lock();
    if (deaf && watcher_ != nullptr) (void)kvWatcher_Stop(watcher_);  // made again at once
  }
}

std::optional<std::chrono::steady_clock::time_point> NodeRegistry::BeatsFailingSince() const {
  const auto since = beats_failing_since_.load();
  if (since == 0) return std::nullopt;
  return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(since));
}

void NodeRegistry::WatchLoop() {
  for (;;) {
    kvWatcher* watcher = nullptr;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      watcher = watcher_;  // set and destroyed only on this thread, or after it ended
    }
    if (watcher == nullptr) {  // broken: made again
      kvWatcher* made = nullptr;
      const bool ok = kvStore_WatchAll(&made, bucket_, nullptr) == NATS_OK;
      std::unique_lock lock(mu_);
      if (ok) watcher_ = made;
      if (!ok && cv_.wait_for(lock, heartbeat_, [&] { return stopping_; })) return;
      continue;
    }
    kvEntry* entry = nullptr;
    const natsStatus s = kvWatcher_Next(&entry, watcher, heartbeat_.count() * 1000);
    if (s == NATS_OK || s == NATS_TIMEOUT) {
      if (entry != nullptr) Heard(entry);  // null: the records there when the watch began are in
      continue;
    }
    std::lock_guard lock(mu_);  // stopped: by the destructor, or found deaf
    if (stopping_) return;
    kvWatcher_Destroy(watcher_);
    watcher_ = nullptr;
  }
}

void NodeRegistry::Heard(kvEntry* entry) {
  const std::string node_id = kvEntry_Key(entry);
  nlohmann::json record;
  if (kvEntry_Operation(entry) == kvOp_Put) {
    record = nlohmann::json::parse(kvEntry_ValueString(entry),
                                   kvEntry_ValueString(entry) + kvEntry_ValueLen(entry), nullptr,
                                   /*allow_exceptions=*/false);
  }
  kvEntry_Destroy(entry);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(view_mu_);
  if (record.is_object()) {
    if (node_id == node_id_) heard_self_ = now;
    // As of when it was written, not heard: a watch made again replays the bucket's last
    // records, and a beat that failed may be sent late from the client's reconnect buffer;
    // either would make a silent node look as if it had just said it holds nothing.
    const int64_t age_ms =
        std::max<int64_t>(0, UnixMillisecondsNow() - record.value("beat_unix_ms", int64_t{0}));
    holders_.Heard(node_id, record, now - std::chrono::milliseconds(age_ms));
    heard_[node_id] = {std::move(record), now};
  } else {
    heard_.erase(node_id);  // deleted (a node that stopped), or not a node's record
    holders_.Left(node_id);
  }
  RebuildView();
}

void NodeRegistry::RebuildView() {
  const auto now = std::chrono::steady_clock::now();
  auto view = std::make_shared<ClusterView>();
  for (auto it = heard_.begin(); it != heard_.end();) {
    // Silent for three heartbeats while this node heard its own (as the bucket's TTL): dead.
    // While this node hears nothing (NATS away, a leader election), the view stays as it was.
    if (heard_self_ - it->second.at > 3 * heartbeat_) {
      it = heard_.erase(it);
      continue;
    }
    nlohmann::json record = it->second.record;
    record["age_s"] = std::chrono::duration<double>(now - it->second.at).count();
    view->nodes.push_back(std::move(record));  // by node id: the map's order
    ++it;
  }
  view->pools = PoolsOf(view->nodes);  // once here, not per request
  view_ = std::move(view);
}

std::optional<RunHolder> NodeRegistry::HolderOf(const std::string& key,
                                                const std::string& pool) const {
  std::lock_guard lock(view_mu_);
  const auto now = std::chrono::steady_clock::now();
  // Deaf (its watch broke, or its beats fail): every record's age would only be how long this
  // node has not heard, and the holders would look dead. In the fault campaign a watch stayed
  // deaf for 20-34 s after every broker was killed, and runs were redone beside their holders.
  if (now - heard_self_ > 2 * heartbeat_) return RunHolder{.heard = heard_self_};
  auto holder = holders_.HolderOf(key, pool, node_id_, now);
  if (holder) holder->in_view = heard_.contains(holder->node_id);
  return holder;
}

nlohmann::json NodeRegistry::DescribeHolders(const std::string& key) const {
  std::lock_guard lock(view_mu_);
  return holders_.Describe(key, std::chrono::steady_clock::now());
}

std::shared_ptr<const ClusterView> NodeRegistry::Cached() const {
  std::lock_guard lock(view_mu_);
  return view_;
}

}  // namespace kc::cluster
