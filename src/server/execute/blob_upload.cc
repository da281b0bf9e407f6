#include "server/execute/blob_upload.h"

namespace kc::server {

StatusOr<store::BlobPtr> BlobUpload::Finish() {
  std::string digest = builder_.Digest();
  if (claimed_ && *claimed_ != digest) {
    return InvalidArgumentError("X-KCoral-Blob-SHA256 " + *claimed_ +
                                " does not match the body (sha256 " + digest + ")");
  }
  return builder_.Seal(std::move(digest));
}

}  // namespace kc::server
