// PeerClient: one node's HTTP requests to another (docs/cluster.md "Blobs never cross the
// broker"): fetch a blob by hash, streamed through SHA-256 into this node's memory, or push one.
// Every request is signed with the cluster's secret (peer_auth.h). A node whose URL is https://
// is spoken to over TLS (issue 26 item 7), its certificate checked against the cluster's peer CA
// with the URL's host name (tls/client_context.h). Blocking, with timeouts: called from a
// request's own thread, never from the event loop.
//
// Thread-safe: one PeerClient serves every request of a node at once (each call has its own
// connection; the TLS context is shared, read-only).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "base/status.h"
#include "cluster/cluster_options.h"
#include "store/blob.h"

namespace kc::cluster {

class PeerClient {
 public:
  // The secret, and the TLS context for https:// nodes as `options` say (--cluster-peer-ca,
  // --cluster-peer-no-verify). Fails closed: a CA file that cannot be read is an error naming it.
  static StatusOr<std::unique_ptr<PeerClient>> Make(const ClusterOptions& options);

  // `tls` null: https:// nodes are refused, saying the node has no peer CA.
  PeerClient(std::string secret, std::unique_ptr<boost::asio::ssl::context> tls,
             std::chrono::seconds timeout = std::chrono::seconds(60))
      : secret_(std::move(secret)), tls_(std::move(tls)), timeout_(timeout) {}

  // GET <node_url>/cluster/blobs/<sha256>: the blob, checked against its hash as it streams.
  // kNotFound when the node does not have it; kUnavailable when it cannot be reached, or its
  // certificate does not verify.
  StatusOr<store::BlobPtr> Fetch(const std::string& node_url, const std::string& sha256) const;
  // POST <node_url>/cluster/blobs with the blob's bytes and hash.
  Status Push(const std::string& node_url, const store::BlobPtr& blob) const;

 private:
  const std::string secret_;
  // Shared by every connection; only SSL objects made from it change (OpenSSL allows that
  // from many threads at once).
  const std::unique_ptr<boost::asio::ssl::context> tls_;
  // Each step (connect, handshake, a read of up to 4 MiB, a write) gives up after this.
  const std::chrono::seconds timeout_;
};

}  // namespace kc::cluster
