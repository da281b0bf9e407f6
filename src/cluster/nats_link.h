// NatsLink: one node's connection to the cluster's NATS servers and their JetStream, through
// the C client (cnats). It reconnects by itself (any server of the list) and owns the
// connection, the JetStream context and the key-value buckets it opened.
//
//   KC_ASSIGN_OR_RETURN(auto link, NatsLink::Connect(options, "kcoral node-1"));
//   KC_ASSIGN_OR_RETURN(kvStore* nodes, link->Bucket("kcoral_nodes", ttl));
//
// Errors are kUnavailable with cnats's words and what was being done. Thread-safe (cnats is).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/cluster_options.h"

namespace kc::cluster {

class NatsLink {
 public:
  static StatusOr<std::unique_ptr<NatsLink>> Connect(const ClusterOptions& options,
                                                     const std::string& name);
  ~NatsLink();
  NatsLink(const NatsLink&) = delete;
  NatsLink& operator=(const NatsLink&) = delete;

  // The bucket, created where it does not exist yet (with the options' replicas and `ttl` as
  // the age at which a key is forgotten; zero: never). Owned by the link. With `republish_to`
  // ("prefix.>"), a bucket created here has the NATS servers publish each stored value there,
  // under its key.
  StatusOr<kvStore*> Bucket(const std::string& name, std::chrono::milliseconds ttl,
                            const std::string& republish_to = "");
  // Whether the bucket `name` republishes its stored values to `republish_to` (one made
  // before it did, or by another version, does not: NATS 2.9 cannot add it later).
  bool Republishes(const std::string& name, const std::string& republish_to) const;

  // Waits until the stream `name` has a leader (its Raft group elected one), up to 10 s:
  // NATS 2.10 and later answer a stream's creation before its group has elected one, and a
  // write meanwhile finds no responders.
  Status AwaitLeader(const std::string& stream) const;
  // Whether a request about a stream found it without a leader (it times out, or nobody
  // answers): one another node has just created, say.
  static bool Leaderless(natsStatus s);
  // Calls `create` (a replicated stream's creation) again while the JetStream cluster is still
  // forming (brokers just started: no meta leader, or too few peers joined to place the
  // replicas), up to 10 s; returns its last status.
  static natsStatus CreateWhileForming(const std::function<natsStatus(jsErrCode*)>& create);

  // The server the connection is on now ("nats://127.0.0.1:4222"), empty while reconnecting.
  std::string ConnectedUrl() const;
  bool connected() const;

  natsConnection* connection() const { return connection_; }
  jsCtx* jetstream() const { return jetstream_; }
  int replicas() const { return replicas_; }

 private:
  NatsLink() = default;

  int replicas_ = 1;
  natsConnection* connection_ = nullptr;
  jsCtx* jetstream_ = nullptr;
  std::mutex mu_;
  std::vector<kvStore*> buckets_;  // mu_
};

// cnats's words for `status`, with its last error's detail where it has one.
std::string NatsError(natsStatus status);

// What to do when a stream or bucket of `replicas` replicas cannot be made: a JetStream cluster
// holds at most one replica per server, and a lone nats-server none beyond the first.
std::string ReplicasAdvice(int replicas);

}  // namespace kc::cluster
