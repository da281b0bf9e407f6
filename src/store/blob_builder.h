// BlobBuilder: one blob made from bytes that arrive in pieces (a request body
// read from the socket), hashed and written into its memfd once, with no
// second pass over the bytes (issue 11).
//
// Hashing (SHA-256, ~1.5 GB/s) and writing into shmem (~2 GB/s, most of it
// the kernel's page allocation) cost about the same, so the two halves are
// separate: Hash() and Write() take the same bytes in the same order and may
// run on two threads at once, as they share no state.
//
// A small blob is held in memory and gets its memfd only when sealed, so a
// body of many small parts (refused later as unreferenced, say) costs no
// file descriptors.
#pragma once

#include <string>
#include <string_view>

#include "base/sha256.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "store/blob.h"

namespace kc::store {

class BlobBuilder {
 public:
  // Blobs up to this size wait in memory for Seal().
  static constexpr size_t kInlineBytes = size_t{1} << 20;

  void Hash(std::string_view bytes);
  Status Write(std::string_view bytes);

  // The digest of everything hashed, as 64 lowercase hex characters. Call once.
  std::string Digest();
  // Seals the memfd into a blob named `sha256` (the caller has checked it).
  StatusOr<BlobPtr> Seal(std::string sha256);

 private:
  UniqueFd fd_;          // made once the bytes outgrow kInlineBytes
  std::string pending_;  // the bytes until then
  Sha256 hash_;
  size_t written_ = 0;
};

}  // namespace kc::store
