// BlobRoutes: POST /blobs and HEAD /blobs/<sha256> (docs/data-path.md "Blob endpoints"): a
// client that asks first which blobs the server lacks, and sends the ones it lacks on their
// own, never pays a CACHE_MISS round trip; the reference client ignores both and keeps the
// three-attempt negotiation (spec §3.3).
#pragma once

#include <string>
#include <string_view>

#include "base/clock.h"
#include "server/core/http_reply.h"
#include "server/core/services.h"
#include "store/blob.h"

namespace kc::server {

class BlobRoutes {
 public:
  explicit BlobRoutes(Services& services) : services_(services) {}

  // `blob`: what the body made (blob_upload.h), or why it made none.
  HttpReply Upload(StatusOr<store::BlobPtr> blob, const std::string& request_id,
                   const std::string& client, Clock::time_point received);
  HttpReply Lookup(std::string_view sha256);

 private:
  Services& services_;
};

}  // namespace kc::server
