// Blob: immutable, content-addressed bytes held in a sealed memfd.
//
// Blobs are shared by the cache tiers and the requests that use them
// (std::shared_ptr<const Blob>), so evicting a blob from a tier never breaks
// an admitted request: it keeps its own reference until it ends (spec §3.2
// step 7). The memfd is what travels to a worker (DESIGN.md "Data path").
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"

namespace kc::store {

// Shown in /proc/<pid>/fd, which makes leaked blob memfds easy to spot.
inline constexpr std::string_view kBlobMemfdName = "kcoral-blob";

class Blob {
 public:
  // Copies `bytes` into a new sealed memfd. `sha256` must already be verified.
  static StatusOr<std::shared_ptr<const Blob>> FromBytes(std::string sha256,
                                                         std::string_view bytes);
  // Takes a memfd of `size` bytes that is already sealed (BlobBuilder).
  static std::shared_ptr<const Blob> FromSealedMemfd(std::string sha256, size_t size, UniqueFd fd);

  // A large blob's memfd is closed on a thread of its own (base/background_close.h): freeing
  // its pages must not fall on whichever thread drops the last reference.
  ~Blob();

  const std::string& sha256() const { return sha256_; }
  size_t size() const { return size_; }
  int fd() const { return fd_.get(); }
  // Reads the bytes back (tests, disk tier writes).
  StatusOr<std::string> ReadAll() const;

 private:
  Blob(std::string sha256, size_t size, UniqueFd fd)
      : sha256_(std::move(sha256)), size_(size), fd_(std::move(fd)) {}

  const std::string sha256_;
  const size_t size_;
  UniqueFd fd_;  // not const: the destructor may hand it on
};

using BlobPtr = std::shared_ptr<const Blob>;

}  // namespace kc::store
