// ClusterOptions: how a node joins a KCoral cluster (docs/cluster.md): the NATS servers, how
// to authenticate to them, and how this node is known. Filled by the command line
// (server/main.cc); the password comes from the environment only, never from argv.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace kc::cluster {

// How a node checks the certificate of a peer node whose URL is https://.
enum class PeerCertificateCheck {
  kAgainstPeerCa,  // chained to ClusterOptions::peer_ca and naming the URL's host
  kNone,           // --cluster-peer-no-verify: encrypted, but anyone on the path may pose as it
};

struct ClusterOptions {
  std::vector<std::string> servers;  // "nats://h1:4222", ...; empty: no cluster
  std::string user;                  // with password from KCORAL_CLUSTER_PASSWORD
  std::string password;
  std::string creds;   // a NATS credentials file (user JWT and NKey seed), instead of user
  std::string tls_ca;  // a CA file: the connection is TLS, servers checked against it
  int replicas = 3;    // of the cluster's JetStream buckets and streams
  // How often this node says it is alive; it is forgotten after three missed beats.
  std::chrono::seconds heartbeat{5};
  // Shared by the cluster's nodes, for their requests to each other (peer_auth.h); from
  // KCORAL_CLUSTER_SECRET or --cluster-secret-file, never argv.
  std::string secret;
  // A running request's node says "in progress" three times per ack_wait; silent that long,
  // the request goes to another node.
  std::chrono::seconds ack_wait{30};
  // How long a node that fell silent is still taken to hold the runs its last record lists
  // (run_holders.h): a redelivered request waits that long for their outcome before it runs
  // again. At least three heartbeats; a node whose heartbeats fail for half of it cancels its
  // runs, since other nodes may take them once it runs out.
  std::chrono::seconds run_lease{30};
  // A tenant's queue unused this long loses its consumer, made again for its next request
  // (work_queue.h); at least twice ack_wait.
  std::chrono::seconds idle_tenant{600};
  // The PEM CA bundle that peers' certificates must chain to (--cluster-peer-ca); empty:
  // https:// peers are refused, unless peer_check is kNone. A node with --tls-cert needs one.
  std::string peer_ca;
  PeerCertificateCheck peer_check = PeerCertificateCheck::kAgainstPeerCa;
  // A front door: the node takes requests and queues them, but runs none of the cluster's
  // (it announces no pool and pulls nothing).
  bool entry_only = false;
  // The NATS servers' monitoring endpoints (http://host:8222), asked whether they sync a write
  // before they acknowledge it (broker_sync.h); allow_lazy_fsync: not asked, no warning.
  std::vector<std::string> nats_monitors;
  bool allow_lazy_fsync = false;
  // How long a request key and its outcome are remembered (retries find them).
  std::chrono::seconds outcome_ttl{3600};
  // How long a quota window's summed seconds are kept (usage_ledger.h): two windows.
  std::chrono::seconds usage_ttl{7200};
};

}  // namespace kc::cluster
