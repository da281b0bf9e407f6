// ClusterOptions: how a node joins a KCoral cluster (docs/cluster.md): the NATS servers, how
// to authenticate to them, and how this node is known. Filled by the command line
// (server/main.cc); the password comes from the environment only, never from argv.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace kc::cluster {

struct ClusterOptions {
  std::vector<std::string> servers;  // "nats://h1:4222", ...; empty: no cluster
  std::string user;                  // with password from KCORAL_CLUSTER_PASSWORD
  std::string password;
  std::string tls_ca;  // a CA file: the connection is TLS, servers checked against it
  int replicas = 3;    // of the cluster's JetStream buckets and streams
  // How often this node says it is alive; it is forgotten after three missed beats.
  std::chrono::seconds heartbeat{5};
};

}  // namespace kc::cluster
