#include "store/blob.h"

#include <utility>

#include "base/memfd.h"

namespace kc::store {

StatusOr<BlobPtr> Blob::FromBytes(std::string sha256, std::string_view bytes) {
  KC_ASSIGN_OR_RETURN(UniqueFd fd, MakeSealedMemfd(kBlobMemfdName, bytes));
  // The constructor is private, so std::make_shared cannot reach it.
  return BlobPtr(new Blob(std::move(sha256), bytes.size(), std::move(fd)));
}

BlobPtr Blob::FromSealedMemfd(std::string sha256, size_t size, UniqueFd fd) {
  return BlobPtr(new Blob(std::move(sha256), size, std::move(fd)));
}

StatusOr<std::string> Blob::ReadAll() const {
  return ReadWholeFd(fd_.get());
}

}  // namespace kc::store
