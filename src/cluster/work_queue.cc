#include "cluster/work_queue.h"

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
    s = js_AddStream(&info, link.jetstream(), &config, nullptr, &code);
    if (s != NATS_OK) {
      // Another node created it meanwhile: that one is as good.
      s = js_GetStreamInfo(&info, link.jetstream(), kStream, nullptr, &code);
    }
  }
  jsStreamInfo_Destroy(info);
  if (s != NATS_OK) {
    return UnavailableError("creating the JetStream stream " + std::string(kStream) + " with " +
                            std::to_string(link.replicas()) + " replicas: " + NatsError(s));
  }
  return std::unique_ptr<WorkQueue>(new WorkQueue(link, options));
}

WorkQueue::~WorkQueue() {
  if (pull_ != nullptr) natsSubscription_Destroy(pull_);  // the durable consumer stays
}

Status WorkQueue::Publish(std::string_view pool, std::string_view tenant, const std::string& id,
                          std::string_view payload) {
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

Status WorkQueue::Serve(const std::string& pool) {
  const std::string subject = "kcoral.work." + pool + ".>";
  const std::string durable = "pool-" + pool;
  jsSubOptions options;
  jsSubOptions_Init(&options);
  options.Stream = kStream;
  options.Config.AckPolicy = js_AckExplicit;
  options.Config.AckWait = Nanoseconds(options_.ack_wait);
  options.Config.MaxDeliver = options_.max_runs + 1;  // the last delivery only says "failed"
  options.Config.MaxAckPending = -1;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_PullSubscribe(&pull_, link_.jetstream(), subject.c_str(), durable.c_str(),
                                        nullptr, &options, &code);
  if (s != NATS_OK) {
    return UnavailableError("pulling work for pool " + pool + ": " + NatsError(s));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Delivery>> WorkQueue::Next(std::chrono::milliseconds wait) {
  natsMsgList list{};
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = natsSubscription_Fetch(&list, pull_, 1, wait.count(), &code);
  if (s == NATS_TIMEOUT) return std::unique_ptr<Delivery>();
  if (s != NATS_OK) return UnavailableError("pulling work: " + NatsError(s));
  std::unique_ptr<Delivery> delivery;
  if (list.Count > 0) {
    delivery = std::make_unique<Delivery>(list.Msgs[0]);
    list.Msgs[0] = nullptr;  // owned by the delivery now
  }
  natsMsgList_Destroy(&list);
  return delivery;
}

}  // namespace kc::cluster
