#include "server/clustering/peer_routes.h"

#include "cluster/cluster_node.h"
#include "cluster/peer_auth.h"
#include "store/blob_store.h"

namespace kc::server {

namespace {

constexpr std::string_view kPeerBlobs = "/cluster/blobs";

}  // namespace

Status PeerRoutes::CheckPeer(std::string_view peer_header, std::string_view method,
                             std::string_view target) const {
  if (services_.cluster == nullptr) return NotFoundError("Not Found");
  return cluster::CheckPeerRequest(services_.cluster->options().secret, peer_header, method, target,
                                   cluster::UnixSecondsNow());
}

net::awaitable<HttpReply> PeerRoutes::Fetch(std::string peer_header, std::string target) {
  if (services_.cluster == nullptr)
    co_return HttpReply{404, "application/json", R"({"detail":"Not Found"})", ""};
  if (Status allowed = CheckPeer(peer_header, "GET", target); !allowed.ok()) {
    co_return EndingReply(RequestEnding::kForbidden, allowed.message(), "");
  }
  const std::string sha256 = target.substr(kPeerBlobs.size() + 1);
  store::BlobPtr blob = services_.blobs.memory().Get(sha256);
  if (blob == nullptr) {
    // Found only on disk, a blob is read and checked whole (DiskTier::Get): on the parse pool,
    // so the event loop keeps serving meanwhile.
    auto reading =
        OnPool(services_.cpu_pool, [this, sha256] { return services_.blobs.disk().Get(sha256); });
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

HttpReply PeerRoutes::Push(std::string_view peer_header, StatusOr<store::BlobPtr> blob) {
  if (services_.cluster == nullptr)
    return HttpReply{404, "application/json", R"({"detail":"Not Found"})", ""};
  if (Status allowed = CheckPeer(peer_header, "POST", kPeerBlobs); !allowed.ok()) {
    return EndingReply(RequestEnding::kForbidden, allowed.message(), "");
  }
  if (!blob.ok()) return EndingReply(EndingForStatus(blob.status()), blob.status().message(), "");
  services_.blobs.Add(*blob);
  return HttpReply{200, "application/json", R"({"stored":true})", ""};
}

}  // namespace kc::server
