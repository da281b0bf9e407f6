// GET /cluster/blobs/<sha256> and POST /cluster/blobs (docs/cluster.md "Blobs never cross the
// broker"): how the nodes of a cluster hand each other blobs and results. Only a request
// signed with the cluster's secret gets anything (cluster/peer_auth.h); a server outside a
// cluster answers 404 as for any unknown route.
#include "cluster/peer_auth.h"
#include "server/app.h"

namespace kc::server {

namespace {

constexpr std::string_view kPeerBlobs = "/cluster/blobs";

}  // namespace

Status App::CheckPeer(std::string_view peer_header, std::string_view method,
                      std::string_view target) const {
  if (!cluster_) return NotFoundError("Not Found");
  return cluster::CheckPeerRequest(cluster_->options().secret, peer_header, method, target,
                                   cluster::UnixSecondsNow());
}

net::awaitable<HttpReply> App::HandlePeerBlobFetch(std::string peer_header, std::string target) {
  if (!cluster_) co_return HttpReply{404, "application/json", R"({"detail":"Not Found"})", ""};
  if (Status allowed = CheckPeer(peer_header, "GET", target); !allowed.ok()) {
    co_return EndingReply(RequestEnding::kForbidden, allowed.message(), "");
  }
  const std::string sha256 = target.substr(kPeerBlobs.size() + 1);
  store::BlobPtr blob = blobs_.memory().Get(sha256);
  if (blob == nullptr) {
    // Found only on disk, a blob is read and checked whole (DiskTier::Get): on the parse pool,
    // so the event loop keeps serving meanwhile.
    auto reading = OnPool(cpu_pool_, [this, sha256] { return blobs_.disk().Get(sha256); });
    blob = co_await std::move(reading);
  }
  if (blob == nullptr) co_return HttpReply{404, "application/octet-stream", "", ""};
  // Never copied: a copy took as much memory again, on the event loop, before the first byte.
  auto mapped = MappedBody(blob->fd());
  if (!mapped.ok()) co_return EndingReply(RequestEnding::kInternal, mapped.status().message(), "");
  HttpReply reply{200, "application/octet-stream", "", ""};
  reply.pieces = std::move(*mapped);
  co_return reply;
}

HttpReply App::HandlePeerBlobPush(std::string_view peer_header, StatusOr<store::BlobPtr> blob) {
  if (!cluster_) return HttpReply{404, "application/json", R"({"detail":"Not Found"})", ""};
  if (Status allowed = CheckPeer(peer_header, "POST", kPeerBlobs); !allowed.ok()) {
    return EndingReply(RequestEnding::kForbidden, allowed.message(), "");
  }
  if (!blob.ok()) return EndingReply(EndingForStatus(blob.status()), blob.status().message(), "");
  blobs_.Add(*blob);
  return HttpReply{200, "application/json", R"({"stored":true})", ""};
}

bool App::AttachedSince(const std::string& key, std::chrono::steady_clock::time_point since) {
  std::lock_guard lock(attached_mu_);
  auto it = attached_.find(key);
  return it != attached_.end() && it->second >= since;
}

}  // namespace kc::server
