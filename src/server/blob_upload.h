// BlobUpload: the body of POST /blobs, one blob sent ahead of the programs
// that use it (docs/protocol.md "Blob endpoints"). Its bytes are hashed and
// written into a memfd as they arrive; the server names the blob by its
// digest, so a client need not hash before it sends. An optional
// X-KCoral-Blob-SHA256 header is checked against the digest.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/body_reader.h"
#include "store/blob_builder.h"

namespace kc::server {

class BlobUpload : public BodyConsumer {
 public:
  explicit BlobUpload(std::optional<std::string> claimed_sha256)
      : claimed_(std::move(claimed_sha256)) {}

  Status Take(std::string_view chunk) override {
    taken_ = chunk;
    return Status::Ok();
  }
  void HashTaken() override { builder_.Hash(taken_); }
  Status StoreTaken() override { return builder_.Write(taken_); }
  // The sealed blob, or kInvalidArgument if the claimed hash does not match.
  StatusOr<store::BlobPtr> Finish();

 private:
  const std::optional<std::string> claimed_;
  store::BlobBuilder builder_;
  std::string_view taken_;
};

}  // namespace kc::server
