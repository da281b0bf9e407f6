#include "store/blob_builder.h"

#include <utility>

#include "base/memfd.h"

namespace kc::store {

void BlobBuilder::Hash(std::string_view bytes) {
  hash_.Update(bytes.data(), bytes.size());
}

Status BlobBuilder::Write(std::string_view bytes) {
  written_ += bytes.size();
  if (!fd_.valid() && written_ <= kInlineBytes) {
    pending_.append(bytes);
    return Status::Ok();
  }
  if (!fd_.valid()) {
    KC_ASSIGN_OR_RETURN(fd_, MakeMemfd(kBlobMemfdName));
    KC_RETURN_IF_ERROR(WriteAll(fd_.get(), pending_));
    pending_ = std::string();
  }
  return WriteAll(fd_.get(), bytes);
}

std::string BlobBuilder::Digest() {
  return hash_.HexDigest();
}

StatusOr<BlobPtr> BlobBuilder::Seal(std::string sha256) {
  if (!fd_.valid()) return Blob::FromBytes(std::move(sha256), pending_);
  KC_RETURN_IF_ERROR(SealMemfd(fd_.get()));
  return Blob::FromSealedMemfd(std::move(sha256), written_, std::move(fd_));
}

}  // namespace kc::store
