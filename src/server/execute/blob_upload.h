// BlobUpload: the body of POST /blobs, one blob sent ahead of the programs
// that use it (docs/data-path.md "Blob endpoints"). Its bytes are hashed and
// written into a memfd as they arrive; the server names the blob by its
// digest, so a client need not hash before it sends. An optional
// X-KCoral-Blob-SHA256 header is checked against the digest.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "server/core/body_reader.h"
#include "store/blob_builder.h"

namespace kc::server {

class BlobUpload : public BodyConsumer {
 public:
  explicit BlobUpload(std::optional<std::string> claimed_sha256)
      : claimed_(std::move(claimed_sha256)) {}

  Status Take(int slot, std::string_view chunk) override {
    taken_[slot] = chunk;
    return Status::Ok();
  }
  void HashTaken(int slot) override { builder_.Hash(taken_[slot]); }
  Status StoreTaken(int slot) override { return builder_.Write(taken_[slot]); }
  // The sealed blob, or kInvalidArgument if the claimed hash does not match.
  StatusOr<store::BlobPtr> Finish();

 private:
  const std::optional<std::string> claimed_;
  store::BlobBuilder builder_;
  std::array<std::string_view, kSlots> taken_;
};

}  // namespace kc::server
