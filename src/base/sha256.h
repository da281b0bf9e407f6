// SHA-256 helpers (OpenSSL EVP). Blob identity on the wire is the lowercase
// hex digest of the raw bytes (spec/protocol.md §3.1).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kc {

// Incremental hasher, for data that arrives in pieces.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  // Returns 64 lowercase hex characters; the hasher may not be reused.
  std::string HexDigest();

 private:
  void* ctx_;  // EVP_MD_CTX*, kept opaque so OpenSSL headers stay out of ours
};

std::string Sha256Hex(std::string_view bytes);

// True for exactly 64 lowercase hex characters.
bool IsSha256Hex(std::string_view text);

}  // namespace kc
