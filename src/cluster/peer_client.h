// PeerClient: one node's HTTP requests to another (docs/cluster.md "Blobs never cross the
// broker"): fetch a blob by hash, streamed through SHA-256 into this node's memory, or push one.
// Every request is signed with the cluster's secret (peer_auth.h). Blocking, with timeouts:
// called from a request's own thread, never from the event loop.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"
#include "store/blob.h"

namespace kc::cluster {

class PeerClient {
 public:
  explicit PeerClient(std::string secret, std::chrono::seconds timeout = std::chrono::seconds(60))
      : secret_(std::move(secret)), timeout_(timeout) {}

  // GET <node_url>/cluster/blobs/<sha256>: the blob, checked against its hash as it streams.
  // kNotFound when the node does not have it; kUnavailable when it cannot be reached.
  StatusOr<store::BlobPtr> Fetch(const std::string& node_url, const std::string& sha256) const;
  // POST <node_url>/cluster/blobs with the blob's bytes and hash.
  Status Push(const std::string& node_url, const store::BlobPtr& blob) const;

 private:
  const std::string secret_;
  const std::chrono::seconds timeout_;
};

}  // namespace kc::cluster
