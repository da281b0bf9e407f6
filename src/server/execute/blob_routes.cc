#include "server/execute/blob_routes.h"

#include "base/sha256.h"
#include "server/status/event_log.h"
#include "store/blob_store.h"

namespace kc::server {

namespace {

// On every answer of the blob endpoints, so that a client can tell "blob
// missing" from "no such endpoint" (a server without them, the reference).
HttpReply Marked(HttpReply reply, std::string_view what) {
  reply.headers.emplace_back("X-KCoral-Blob", what);
  return reply;
}

}  // namespace

HttpReply BlobRoutes::Upload(StatusOr<store::BlobPtr> blob, const std::string& request_id,
                             const std::string& client, Clock::time_point received) {
  const double ms = MillisecondsSince(received);
  if (!blob.ok()) {
    services_.events.Emit(EventLevel::kWarning, "blob_refused",
                          {{"request_id", request_id},
                           {"client", client},
                           {"error_message", blob.status().message()}});
    return Marked(EndingReply(EndingForStatus(blob.status()), blob.status().message(), request_id),
                  "refused");
  }
  const bool cached = services_.blobs.Add(*blob);
  services_.events.Emit(EventLevel::kInfo, "blob_received",
                        {{"request_id", request_id},
                         {"client", client},
                         {"sha256", (*blob)->sha256()},
                         {"bytes", (*blob)->size()},
                         {"cached", cached},
                         {"total_ms", ms}});
  // Not cached (larger than a quarter of the memory tier): the client sends it inline.
  nlohmann::ordered_json body = {
      {"sha256", (*blob)->sha256()}, {"size", (*blob)->size()}, {"cached", cached}};
  HttpReply reply{200, "application/json", DumpJson(body), request_id};
  reply.server_ms = ms;
  return Marked(std::move(reply), "stored");
}

HttpReply BlobRoutes::Lookup(std::string_view sha256) {
  // HEAD: the status is the answer, the body is never sent.
  if (!IsSha256Hex(sha256)) return Marked({400, "application/json", "", ""}, "malformed");
  const bool present = services_.blobs.Contains(std::string(sha256));
  return Marked({present ? 200 : 404, "application/json", "", ""}, present ? "present" : "missing");
}

}  // namespace kc::server
