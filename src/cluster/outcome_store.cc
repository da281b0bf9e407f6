#include "cluster/outcome_store.h"

namespace kc::cluster {

namespace {

// cnats calls back with a message it hands over; the closure is ours until unsubscribed.
struct Listener {
  std::function<void(natsMsg*)> on_message;
};

void Dispatch(natsConnection*, natsSubscription*, natsMsg* message, void* closure) {
  static_cast<Listener*>(closure)->on_message(message);
  natsMsg_Destroy(message);
}

const std::string kOutcomes = "kcoral_outcomes";
// Where an outcome is announced, under its key.
const std::string kAnnounced = "kcoral.outcome.";

// `key`'s value in `bucket`, into `value`; NATS_NOT_FOUND when it has none.
natsStatus ReadValue(kvStore* bucket, const std::string& key, std::string& value) {
  kvEntry* entry = nullptr;
  const natsStatus s = kvStore_Get(&entry, bucket, key.c_str());
  if (s != NATS_OK) return s;
  value.assign(kvEntry_ValueString(entry), static_cast<size_t>(kvEntry_ValueLen(entry)));
  kvEntry_Destroy(entry);
  return NATS_OK;
}

// A claim's value: "<program hash> <nonce>".
struct ClaimValue {
  std::string program_hash, nonce;
};

ClaimValue ClaimValueOf(const std::string& text) {
  const size_t space = text.find(' ');
  if (space == std::string::npos) return {text, ""};
  return {text.substr(0, space), text.substr(space + 1)};
}

StatusOr<std::unique_ptr<Subscription>> Subscribe(natsConnection* connection,
                                                  const std::string& subject,
                                                  std::function<void(natsMsg*)> on_message) {
  auto listener = std::make_shared<Listener>(Listener{std::move(on_message)});
  natsSubscription* sub = nullptr;
  const natsStatus s =
      natsConnection_Subscribe(&sub, connection, subject.c_str(), Dispatch, listener.get());
  if (s != NATS_OK) return UnavailableError("subscribing to " + subject + ": " + NatsError(s));
  return std::make_unique<Subscription>(sub, std::move(listener));
}

}  // namespace

Subscription::~Subscription() {
  // Drained, not just unsubscribed: a callback in progress ends before the listener goes.
  if (natsSubscription_Drain(subscription_) == NATS_OK) {
    (void)natsSubscription_WaitForDrainCompletion(subscription_, 5000);
  } else {
    natsSubscription_Unsubscribe(subscription_);
  }
  natsSubscription_Destroy(subscription_);
}

StatusOr<std::unique_ptr<OutcomeStore>> OutcomeStore::Open(NatsLink& link,
                                                           std::chrono::seconds ttl) {
  KC_ASSIGN_OR_RETURN(kvStore * claims, link.Bucket("kcoral_claims", ttl));
  KC_ASSIGN_OR_RETURN(kvStore * outcomes, link.Bucket(kOutcomes, ttl, kAnnounced + ">"));
  const bool servers_announce = link.Republishes(kOutcomes, kAnnounced + ">");
  return std::unique_ptr<OutcomeStore>(new OutcomeStore(link, claims, outcomes, servers_announce));
}

StatusOr<Claim> OutcomeStore::Claim(const std::string& key, const std::string& program_hash,
                                    const std::string& nonce) {
  uint64_t revision = 0;
  const std::string value = program_hash + " " + nonce;
  natsStatus s = kvStore_CreateString(&revision, claims_, key.c_str(), value.c_str());
  if (s == NATS_OK) return cluster::Claim{ClaimResult::kNew, nonce};
  const std::string create_error = NatsError(s);
  std::string text;
  // Neither written nor there: the bucket is away (a leader election), and the create said why.
  if (ReadValue(claims_, key, text) != NATS_OK) {
    return UnavailableError("claiming a request key: " + create_error);
  }
  const ClaimValue held = ClaimValueOf(text);
  return cluster::Claim{
      held.program_hash == program_hash ? ClaimResult::kSameProgram : ClaimResult::kOtherProgram,
      held.nonce};
}

StatusOr<std::optional<std::string>> OutcomeStore::ClaimNonce(const std::string& key) {
  std::string text;
  const natsStatus s = ReadValue(claims_, key, text);
  if (s == NATS_NOT_FOUND) return std::optional<std::string>();
  if (s != NATS_OK) return UnavailableError("reading a request key's claim: " + NatsError(s));
  return std::optional<std::string>(ClaimValueOf(text).nonce);
}

void OutcomeStore::Release(const std::string& key) {
  (void)kvStore_Delete(claims_, key.c_str());  // best effort: the TTL forgets it anyway
}

StatusOr<bool> OutcomeStore::Put(const std::string& key, const std::string& record) {
  uint64_t revision = 0;
  const natsStatus s = kvStore_Create(&revision, outcomes_, key.c_str(), record.data(),
                                      static_cast<int>(record.size()));
  if (s == NATS_OK) {
    if (!servers_announce_) Announce(key, record);
    return true;
  }
  // "Wrong last sequence": one is there. Anything else is a failure to store.
  auto existing = Get(key);
  if (existing.ok() && existing->has_value()) return false;
  return UnavailableError("storing a request's outcome: " + NatsError(s));
}

StatusOr<std::optional<std::string>> OutcomeStore::Get(const std::string& key) {
  std::string text;
  const natsStatus s = ReadValue(outcomes_, key, text);
  if (s == NATS_NOT_FOUND) return std::optional<std::string>();
  if (s != NATS_OK) return UnavailableError("reading a request's outcome: " + NatsError(s));
  return std::optional<std::string>(std::move(text));
}

StatusOr<std::optional<std::string>> OutcomeStore::GetFromLeader(const std::string& key) {
  // STREAM.MSG.GET, which only the stream's leader answers (kvStore_Get asks any replica).
  const std::string stream = "KV_" + kOutcomes;
  const std::string subject = "$KV." + kOutcomes + "." + key;
  natsMsg* message = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s =
      js_GetLastMsg(&message, link_.jetstream(), stream.c_str(), subject.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND) return std::optional<std::string>();
  if (s != NATS_OK) return UnavailableError("reading a request's outcome: " + NatsError(s));
  std::string text(natsMsg_GetData(message), static_cast<size_t>(natsMsg_GetDataLength(message)));
  natsMsg_Destroy(message);
  return std::optional<std::string>(std::move(text));
}

void OutcomeStore::Announce(const std::string& key, const std::string& record) {
  const std::string subject = kAnnounced + key;
  // Best effort: a waiter that misses it finds the stored outcome when it looks again.
  (void)natsConnection_Publish(link_.connection(), subject.c_str(), record.data(),
                               static_cast<int>(record.size()));
}

StatusOr<std::unique_ptr<Subscription>> OutcomeStore::Await(
    const std::string& key, std::function<void(std::string)> on_outcome) {
  return Subscribe(link_.connection(), kAnnounced + key,
                   [on_outcome = std::move(on_outcome)](natsMsg* message) {
                     on_outcome(std::string(natsMsg_GetData(message),
                                            static_cast<size_t>(natsMsg_GetDataLength(message))));
                   });
}

void OutcomeStore::Tell(const std::string& what, const std::string& key) {
  const std::string subject = "kcoral." + what + "." + key;
  (void)natsConnection_Publish(link_.connection(), subject.c_str(), nullptr, 0);
}

StatusOr<std::unique_ptr<Subscription>> OutcomeStore::Hear(
    const std::string& what, std::function<void(std::string)> on_key) {
  const std::string prefix = "kcoral." + what + ".";
  return Subscribe(link_.connection(), prefix + "*",
                   [prefix, on_key = std::move(on_key)](natsMsg* message) {
                     on_key(std::string(natsMsg_GetSubject(message)).substr(prefix.size()));
                   });
}

}  // namespace kc::cluster
