#include "cluster/work_queue.h"

#include <algorithm>
#include <vector>

namespace kc::cluster {

namespace {

int64_t Nanoseconds(std::chrono::seconds s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(s).count();
}

}  // namespace

Delivery::Delivery(natsMsg* message) : message_(message) {
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, message_) == NATS_OK) {
    delivered_ = meta->NumDelivered;
    jsMsgMetaData_Destroy(meta);
  }
}

Delivery::~Delivery() {
  natsMsg_Destroy(message_);
}

std::string_view Delivery::data() const {
  return {natsMsg_GetData(message_), static_cast<size_t>(natsMsg_GetDataLength(message_))};
}

std::string Delivery::tenant() const {
  const std::string_view subject = natsMsg_GetSubject(message_);
  return std::string(subject.substr(subject.rfind('.') + 1));
}

void Delivery::InProgress() {
  (void)natsMsg_InProgress(message_, nullptr);  // a lost one is caught by the next
}

Status Delivery::Ack() {
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = natsMsg_AckSync(message_, nullptr, &code);
  if (s != NATS_OK) return UnavailableError("acknowledging a request: " + NatsError(s));
  return Status::Ok();
}

void Delivery::GiveBack() {
  (void)natsMsg_Nak(message_, nullptr);
}

StatusOr<std::unique_ptr<WorkQueue>> WorkQueue::Open(NatsLink& link, WorkQueueOptions options) {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, link.jetstream(), kStream, nullptr, &code);
  if (NatsLink::Leaderless(s)) {  // another node is creating it (two nodes started at once)
    KC_RETURN_IF_ERROR(link.AwaitLeader(kStream));
    s = js_GetStreamInfo(&info, link.jetstream(), kStream, nullptr, &code);
  }
  if (s == NATS_NOT_FOUND) {
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    const char* subjects[] = {"kcoral.work.>"};
    config.Name = kStream;
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Retention = js_WorkQueuePolicy;  // a request leaves the stream once acknowledged
    config.Storage = js_FileStorage;
    config.Replicas = link.replicas();
    config.Duplicates = Nanoseconds(options.duplicate_window);
    s = NatsLink::CreateWhileForming([&](jsErrCode* forming) {
      return js_AddStream(&info, link.jetstream(), &config, nullptr, forming);
    });
    if (s != NATS_OK) {
      // Another node created it meanwhile: that one is as good.
      s = js_GetStreamInfo(&info, link.jetstream(), kStream, nullptr, &code);
    }
  }
  jsStreamInfo_Destroy(info);
  if (s != NATS_OK) {
    return UnavailableError("creating the JetStream stream " + std::string(kStream) + " with " +
                            std::to_string(link.replicas()) + " replicas: " + NatsError(s) +
                            ReplicasAdvice(link.replicas()));
  }
  KC_RETURN_IF_ERROR(link.AwaitLeader(kStream));
  std::unique_ptr<WorkQueue> queue(new WorkQueue(link, options));
  queue->HearDeletions();
  return queue;
}

WorkQueue::~WorkQueue() {
  for (auto& [tenant, pull] : pulls_)
    natsSubscription_Destroy(pull);  // the durable consumers stay
  // Drained: a callback in progress ends before the members go.
  for (natsSubscription* heard : {wake_, deletions_}) {
    if (heard == nullptr) continue;
    if (natsSubscription_Drain(heard) == NATS_OK)
      (void)natsSubscription_WaitForDrainCompletion(heard, 5000);
    natsSubscription_Destroy(heard);
  }
}

std::string WorkQueue::Durable(std::string_view pool, std::string_view tenant) {
  return "pool-" + std::string(pool) + "--" + std::string(tenant);  // no "." in a durable name
}

Status WorkQueue::EnsureConsumer(const std::string& pool, const std::string& tenant) {
  const std::string durable = Durable(pool, tenant);
  {
    std::lock_guard lock(ensured_mu_);
    const auto now = std::chrono::steady_clock::now();
    auto made = ensured_.find(durable);
    if (made != ensured_.end() && now < made->second) return Status::Ok();
  }
  const std::string subject = "kcoral.work." + pool + "." + tenant;
  jsConsumerConfig config;
  jsConsumerConfig_Init(&config);
  config.Durable = durable.c_str();
  config.FilterSubject = subject.c_str();
  config.AckPolicy = js_AckExplicit;
  config.AckWait = Nanoseconds(options_.ack_wait);
  config.MaxDeliver = options_.max_runs + 1;  // the last delivery only says "failed"
  config.MaxAckPending = -1;
  config.InactiveThreshold = Nanoseconds(options_.idle_consumer);
  jsConsumerInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_AddConsumer(&info, link_.jetstream(), kStream, &config, nullptr, &code);
  if (s != NATS_OK) {  // another node made it, maybe with other settings: that one serves
    s = js_GetConsumerInfo(&info, link_.jetstream(), kStream, durable.c_str(), nullptr, &code);
  }
  jsConsumerInfo_Destroy(info);
  if (s != NATS_OK) {
    return UnavailableError("making the work queue's consumer " + durable + ": " + NatsError(s));
  }
  std::lock_guard lock(ensured_mu_);
  ensured_[durable] = std::chrono::steady_clock::now() + options_.idle_consumer / 2;
  return Status::Ok();
}

void WorkQueue::HearDeletions() {
  auto on_deleted = [](natsConnection*, natsSubscription*, natsMsg* message, void* closure) {
    auto* queue = static_cast<WorkQueue*>(closure);
    const std::string_view subject = natsMsg_GetSubject(message);
    const std::string durable(subject.substr(subject.rfind('.') + 1));
    natsMsg_Destroy(message);
    std::lock_guard lock(queue->ensured_mu_);
    queue->ensured_.erase(durable);
  };
  const std::string subject = "$JS.EVENT.ADVISORY.CONSUMER.DELETED." + std::string(kStream) + ".*";
  // Not heard (a subject the account may not read): the half threshold still bounds it.
  (void)natsConnection_Subscribe(&deletions_, link_.connection(), subject.c_str(), on_deleted,
                                 this);
}

Status WorkQueue::Publish(std::string_view pool, std::string_view tenant, const std::string& id,
                          std::string_view payload) {
  KC_RETURN_IF_ERROR(EnsureConsumer(std::string(pool), std::string(tenant)));
  const std::string subject = "kcoral.work." + std::string(pool) + "." + std::string(tenant);
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.MsgId = id.c_str();
  jsPubAck* ack = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_Publish(&ack, link_.jetstream(), subject.c_str(), payload.data(),
                                  static_cast<int>(payload.size()), &options, &code);
  jsPubAck_Destroy(ack);
  if (s != NATS_OK) return UnavailableError("queueing the request in the cluster: " + NatsError(s));
  return Status::Ok();
}

void WorkQueue::Wake(std::string_view pool, std::string_view tenant, std::string_view claim_nonce) {
  const std::string subject = "kcoral.wake." + std::string(pool);
  std::string data(tenant);
  if (!claim_nonce.empty()) data += " " + std::string(claim_nonce);
  (void)natsConnection_Publish(link_.connection(), subject.c_str(), data.data(),
                               static_cast<int>(data.size()));
}

void WorkQueue::HeardWake(std::string_view data) {
  const size_t space = data.find(' ');
  std::lock_guard lock(wakes_mu_);
  woken_.emplace(data.substr(0, space));
  if (space != std::string_view::npos && confirmed_.emplace(data.substr(space + 1)).second) {
    confirmed_order_.emplace_back(data.substr(space + 1));
    if (confirmed_order_.size() > kConfirmedKept) {  // those fetched elsewhere
      confirmed_.erase(confirmed_order_.front());
      confirmed_order_.pop_front();
    }
  }
  heard_.notify_all();
}

bool WorkQueue::TakeConfirmedClaim(const std::string& nonce, std::chrono::microseconds wait) {
  std::unique_lock lock(wakes_mu_);
  heard_.wait_for(lock, wait, [&] { return confirmed_.count(nonce) > 0; });
  return confirmed_.erase(nonce) > 0;  // its place in the order goes with the oldest
}

Status WorkQueue::Serve(const std::string& pool) {
  pool_ = pool;
  const std::string wake = "kcoral.wake." + pool;
  // Heard on a NATS thread, whatever the puller is doing: a claim's confirmation must not wait
  // for the puller to come back from a fetch.
  auto on_wake = [](natsConnection*, natsSubscription*, natsMsg* message, void* closure) {
    static_cast<WorkQueue*>(closure)->HeardWake(
        {natsMsg_GetData(message), static_cast<size_t>(natsMsg_GetDataLength(message))});
    natsMsg_Destroy(message);
  };
  const natsStatus s =
      natsConnection_Subscribe(&wake_, link_.connection(), wake.c_str(), on_wake, this);
  if (s != NATS_OK) return UnavailableError("pulling work for pool " + pool + ": " + NatsError(s));
  return Sweep();
}

Status WorkQueue::Sweep() {
  // One request whatever the number of tenants: the stream's count of messages per subject
  // (those of a work queue are its requests not yet acknowledged, run or waiting).
  const std::string subjects = "kcoral.work." + pool_ + ".*";
  jsOptions options;
  jsOptions_Init(&options);
  options.Stream.Info.SubjectsFilter = subjects.c_str();
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetStreamInfo(&info, link_.jetstream(), kStream, &options, &code);
  if (s != NATS_OK) {
    return UnavailableError("looking for the work queue's requests: " + NatsError(s));
  }
  std::set<std::string> tenants;
  for (int i = 0; info->State.Subjects != nullptr && i < info->State.Subjects->Count; ++i) {
    const std::string_view subject = info->State.Subjects->List[i].Subject;
    tenants.emplace(subject.substr(subject.rfind('.') + 1));
  }
  jsStreamInfo_Destroy(info);
  last_sweep_ = std::chrono::steady_clock::now();
  return ToAsk(tenants);
}

Status WorkQueue::ToAsk(const std::set<std::string>& tenants) {
  for (const std::string& tenant : tenants) {
    to_ask_.insert(tenant);
    if (pulls_.count(tenant)) continue;
    KC_RETURN_IF_ERROR(EnsureConsumer(pool_, tenant));
    const std::string durable = Durable(pool_, tenant);
    const std::string subject = "kcoral.work." + pool_ + "." + tenant;
    jsSubOptions options;
    jsSubOptions_Init(&options);
    options.Stream = kStream;
    options.Consumer = durable.c_str();  // bind: EnsureConsumer made it
    natsSubscription* pull = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s = js_PullSubscribe(&pull, link_.jetstream(), subject.c_str(),
                                          durable.c_str(), nullptr, &options, &code);
    if (s != NATS_OK) {
      return UnavailableError("pulling work for pool " + pool_ + ", tenant " + tenant + ": " +
                              NatsError(s));
    }
    pulls_[tenant] = pull;
  }
  return Status::Ok();
}

std::unique_ptr<Delivery> WorkQueue::TryFetch(natsSubscription* pull,
                                              std::chrono::milliseconds hold) {
  jsFetchRequest request;
  jsFetchRequest_Init(&request);
  request.Batch = 1;
  // The server keeps a no-wait request with an expiry open until a message comes or the expiry
  // passes (without one, cnats stops waiting for the answer at once); measured on 2.9.10,
  // 2.10.25 and 2.15.1 by bench/nats_workarounds.py.
  request.NoWait = true;
  request.Expires = std::chrono::duration_cast<std::chrono::nanoseconds>(hold).count();
  natsMsgList list{};
  if (natsSubscription_FetchRequest(&list, pull, &request) != NATS_OK) return nullptr;
  std::unique_ptr<Delivery> delivery;
  if (list.Count > 0) {
    delivery = std::make_unique<Delivery>(list.Msgs[0]);
    list.Msgs[0] = nullptr;  // owned by the delivery now
  }
  natsMsgList_Destroy(&list);
  return delivery;
}

std::unique_ptr<Delivery> WorkQueue::AskInOrder(const Rank& rank) {
  std::vector<std::pair<double, std::string>> order;
  for (const std::string& tenant : to_ask_)
    order.emplace_back(rank(tenant), tenant);
  std::sort(order.begin(), order.end());
  // Nothing to ask: the queue that gave the last request is held open, for its next.
  if (order.empty() && pulls_.count(last_found_)) order.emplace_back(0, last_found_);
  // An empty queue answers after its hold: short for all but the last asked, so an idle
  // tenant ahead in the order never keeps the others' requests waiting; the last one's
  // longer hold takes a request queued just after as soon as it is stored.
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string& tenant = order[i].second;
    // A queue just woken holds a request stored a moment ago, which its consumer's replica
    // may not have applied yet (a broker that syncs each write lags by a sync or two).
    const bool fresh = just_woken_.erase(tenant) > 0;
    const auto hold = i + 1 < order.size() && !fresh ? kAskHold : kLastAskHold;
    // A consumer idle past its threshold is gone, and a fetch from it would only time out:
    // made again first, the binding serves again.
    if (!EnsureConsumer(pool_, tenant).ok()) continue;  // NATS away: asked again later
    if (auto delivery = TryFetch(pulls_.at(tenant), hold)) {
      last_found_ = tenant;
      return delivery;
    }
    to_ask_.erase(tenant);  // until a wake or a sweep says otherwise
  }
  return nullptr;
}

StatusOr<std::unique_ptr<Delivery>> WorkQueue::Next(std::chrono::milliseconds wait,
                                                    const Rank& rank) {
  // The tenants woken since the last look (after waiting up to `up_to` for one).
  auto take_woken = [&](std::chrono::milliseconds up_to) {
    std::set<std::string> woken;
    std::unique_lock lock(wakes_mu_);
    heard_.wait_for(lock, up_to, [&] { return !woken_.empty(); });
    woken.swap(woken_);
    just_woken_.insert(woken.begin(), woken.end());
    return woken;
  };
  KC_RETURN_IF_ERROR(ToAsk(take_woken(std::chrono::milliseconds(0))));
  if (std::chrono::steady_clock::now() - last_sweep_ >= kSweepEvery) KC_RETURN_IF_ERROR(Sweep());
  if (auto delivery = AskInOrder(rank)) return delivery;
  const std::set<std::string> woken = take_woken(wait);
  KC_RETURN_IF_ERROR(woken.empty() ? Sweep() : ToAsk(woken));  // idle: a sweep
  return AskInOrder(rank);
}

}  // namespace kc::cluster
