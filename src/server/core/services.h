// Services: what a route or the cluster's executor may use, named by reference (issue 41): the
// parts App owns, once they all exist (App builds one after its workers start). Nothing here
// owns anything, so a test can build one from parts of its own (tests/unit/server).
#pragma once

#include <atomic>
#include <string>
#include <type_traits>

#include <boost/asio.hpp>

#include "server/core/on_pool.h"

namespace kc::cluster {
class ClusterNode;
class PeerClient;
}  // namespace kc::cluster
namespace kc::pool {
class WorkerPool;
}  // namespace kc::pool
namespace kc::store {
class BlobStore;
}  // namespace kc::store

namespace kc::server {

// Named only: a file that uses a part includes its header, so this one ties no room to another.
struct ServerConfig;
class EventLog;
class Metrics;
class TenantQuotas;
class AccessControl;
class RequestRing;
class StatusHistory;

namespace net = boost::asio;

// The server's own life, as routes see it.
struct ServerState {
  std::string instance_id;
  std::string started_at;
  bool tls = false;  // --tls-cert: the listener speaks HTTPS
  std::atomic<bool> shutting_down{false};
  std::atomic<int> in_flight{0};  // /execute requests not yet answered
};

struct Services {
  const ServerConfig& config;
  ServerState& state;
  EventLog& events;
  Metrics& metrics;
  store::BlobStore& blobs;
  pool::WorkerPool& pool;
  TenantQuotas& quotas;
  AccessControl& access;
  RequestRing& requests;       // the dashboard's last requests
  StatusHistory& history;      // and its last hour
  net::io_context& io;         // the event loop
  net::thread_pool& cpu_pool;  // parsing, hashing and reply building, off the event loop
  // In a cluster (null otherwise, and set once the node has joined): the node, how other nodes
  // reach this one, the client for their blobs and records, and the threads for calls that
  // wait on NATS or on another node.
  cluster::ClusterNode* cluster = nullptr;
  const std::string& node_url;
  cluster::PeerClient* peers = nullptr;
  net::thread_pool* cluster_calls = nullptr;
};

// Runs `call`, which may wait on the cluster (a NATS round trip through a leader election, a
// dead node's connect timeout), on the cluster-calls threads, so that neither the event loop
// nor the parse pool waits with it. On a single node, at once: it waits on nothing.
template <class Call>
net::awaitable<std::invoke_result_t<Call&>> ClusterCall(Services& services, Call call) {
  if (services.cluster_calls == nullptr) co_return call();
  auto running = OnPool(*services.cluster_calls, std::move(call));  // named: see on_pool.h
  co_return co_await std::move(running);
}

}  // namespace kc::server
