#include "cluster/nats_link.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <string_view>
#include <thread>

namespace kc::cluster {

namespace {

// How long a stream just made may take to elect its leader (a Raft election: a second or two).
constexpr auto kLeaderWait = std::chrono::seconds(10);
// A ping every heartbeat, at most this far apart; a server that leaves this many unanswered is
// stale at the next one (so about three pings after it stopped answering).
constexpr auto kLongestPing = std::chrono::seconds(2);
constexpr int kPingsUnanswered = 2;

// cnats's options, freed on every path.
struct OptionsHolder {
  natsOptions* options = nullptr;
  ~OptionsHolder() { natsOptions_Destroy(options); }
};

Status Failed(const std::string& what, natsStatus status) {
  return UnavailableError(what + ": " + NatsError(status));
}

}  // namespace

std::string NatsError(natsStatus status) {
  std::string text = natsStatus_GetText(status);
  natsStatus last = NATS_OK;
  const char* detail = nats_GetLastError(&last);
  // cnats's detail reads "(conn.c:2088): No server available ...": only a new fact is kept.
  if (detail != nullptr && std::string_view(detail).find(text) == std::string_view::npos) {
    text += " (" + std::string(detail) + ")";
  }
  return text;
}

StatusOr<std::unique_ptr<NatsLink>> NatsLink::Connect(const ClusterOptions& options,
                                                      const std::string& name) {
  if (options.servers.empty()) return InvalidArgumentError("--cluster names no NATS server");
  OptionsHolder holder;
  natsStatus s = natsOptions_Create(&holder.options);
  std::vector<const char*> urls;
  for (const auto& url : options.servers)
    urls.push_back(url.c_str());
  if (s == NATS_OK)
    s = natsOptions_SetServers(holder.options, urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetName(holder.options, name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(holder.options, 5000);
  // Every publish goes out at once: cnats's flusher otherwise holds a lone one (a wake, an
  // outcome's announcement) up to 1 ms for more to come, and each is on a request's path.
  if (s == NATS_OK) s = natsOptions_SetSendAsap(holder.options, true);
  if (s == NATS_OK)
    s = natsOptions_SetMaxReconnect(holder.options, -1);  // forever: the cluster outlives a server
  // A server that hangs (stopped, stalled) keeps its TCP connection open: with cnats's default
  // pings (every 2 min, 2 unanswered) a node stayed on it for minutes, its heartbeats failing,
  // fenced after half the run lease. Now it moves to another server about three pings after
  // its own stopped answering.
  const auto ping_every = std::min<std::chrono::milliseconds>(options.heartbeat, kLongestPing);
  if (s == NATS_OK) s = natsOptions_SetPingInterval(holder.options, ping_every.count());
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(holder.options, kPingsUnanswered);
  if (s == NATS_OK && !options.user.empty()) {
    s = natsOptions_SetUserInfo(holder.options, options.user.c_str(), options.password.c_str());
  }
  if (s == NATS_OK && !options.creds.empty()) {
    s = natsOptions_SetUserCredentialsFromFiles(holder.options, options.creds.c_str(), nullptr);
  }
  if (s == NATS_OK && !options.tls_ca.empty()) {
    s = natsOptions_SetSecure(holder.options, true);
    if (s == NATS_OK)
      s = natsOptions_LoadCATrustedCertificates(holder.options, options.tls_ca.c_str());
  }
  if (s != NATS_OK) return Failed("NATS options", s);

  std::unique_ptr<NatsLink> link(new NatsLink());
  link->replicas_ = options.replicas;
  s = natsConnection_Connect(&link->connection_, holder.options);
  if (s != NATS_OK) return Failed("connecting to the cluster's NATS servers", s);
  s = natsConnection_JetStream(&link->jetstream_, link->connection_, nullptr);
  if (s != NATS_OK) return Failed("opening JetStream", s);
  return link;
}

NatsLink::~NatsLink() {
  for (kvStore* bucket : buckets_)
    kvStore_Destroy(bucket);
  jsCtx_Destroy(jetstream_);
  if (connection_ != nullptr) {
    natsConnection_Close(connection_);
    natsConnection_Destroy(connection_);
  }
}

StatusOr<kvStore*> NatsLink::Bucket(const std::string& name, std::chrono::milliseconds ttl,
                                    const std::string& republish_to) {
  kvStore* bucket = nullptr;
  natsStatus s = js_KeyValue(&bucket, jetstream_, name.c_str());
  if (Leaderless(s)) {  // another node is creating it (two nodes started at once)
    KC_RETURN_IF_ERROR(AwaitLeader("KV_" + name));
    s = js_KeyValue(&bucket, jetstream_, name.c_str());
  }
  if (s == NATS_NOT_FOUND) {
    kvConfig config;
    kvConfig_Init(&config);
    config.Bucket = name.c_str();
    config.History = 1;
    config.Replicas = replicas_;
    config.TTL = std::chrono::duration_cast<std::chrono::nanoseconds>(ttl).count();
    const std::string source = "$KV." + name + ".>";
    jsRePublish republish;
    jsRePublish_Init(&republish);
    if (!republish_to.empty()) {
      republish.Source = source.c_str();
      republish.Destination = republish_to.c_str();
      config.RePublish = &republish;
    }
    s = js_CreateKeyValue(&bucket, jetstream_, &config);
    if (s != NATS_OK) {
      return UnavailableError("creating the key-value bucket " + name + " with " +
                              std::to_string(replicas_) + " replicas: " + NatsError(s) +
                              ReplicasAdvice(replicas_));
    }
  } else if (s != NATS_OK) {
    return Failed("opening the key-value bucket " + name, s);
  }
  // Made here, or a moment ago by a node that started with this one: writes find no
  // responders until its group has a leader.
  KC_RETURN_IF_ERROR(AwaitLeader("KV_" + name));
  std::lock_guard lock(mu_);
  buckets_.push_back(bucket);
  return bucket;
}

bool NatsLink::Leaderless(natsStatus s) {
  return s == NATS_TIMEOUT || s == NATS_NO_RESPONDERS;
}

natsStatus NatsLink::CreateWhileForming(const std::function<natsStatus(jsErrCode*)>& create) {
  const auto deadline = std::chrono::steady_clock::now() + kLeaderWait;
  for (;;) {
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s = create(&code);
    const bool forming =
        Leaderless(s) || code == JSClusterNoPeersErr || code == JSClusterNotAvailErr;
    if (s == NATS_OK || !forming || std::chrono::steady_clock::now() > deadline) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status NatsLink::AwaitLeader(const std::string& stream) const {
  const auto deadline = std::chrono::steady_clock::now() + kLeaderWait;
  for (;;) {
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s = js_GetStreamInfo(&info, jetstream_, stream.c_str(), nullptr, &code);
    const bool led =
        s == NATS_OK && (info->Cluster == nullptr ||
                         (info->Cluster->Leader != nullptr && *info->Cluster->Leader != '\0'));
    jsStreamInfo_Destroy(info);
    if (led) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline) {
      return UnavailableError("the JetStream stream " + stream + " elected no leader within " +
                              std::to_string(kLeaderWait.count()) + " s" +
                              (s == NATS_OK ? std::string() : ": " + NatsError(s)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool NatsLink::Republishes(const std::string& name, const std::string& republish_to) const {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const std::string stream = "KV_" + name;
  if (js_GetStreamInfo(&info, jetstream_, stream.c_str(), nullptr, &code) != NATS_OK) return false;
  const jsRePublish* republish = info->Config->RePublish;
  const bool republishes = republish != nullptr && republish->Destination != nullptr &&
                           republish_to == republish->Destination && !republish->HeadersOnly;
  jsStreamInfo_Destroy(info);
  return republishes;
}

std::string NatsLink::ConnectedUrl() const {
  std::array<char, 256> url{};
  if (natsConnection_GetConnectedUrl(connection_, url.data(), url.size()) != NATS_OK) return "";
  return url.data();
}

bool NatsLink::connected() const {
  return natsConnection_Status(connection_) == NATS_CONN_STATUS_CONNECTED;
}

std::string ReplicasAdvice(int replicas) {
  if (replicas <= 1) return "";
  return " (--cluster-replicas " + std::to_string(replicas) +
         " needs a JetStream cluster of at least " + std::to_string(replicas) +
         " nats-servers; with one nats-server, start every node with --cluster-replicas 1)";
}

}  // namespace kc::cluster
