// DiskTier: persistent content-addressed cache for `file` upload blobs
// (spec/server.md §4). Layout `<dir>/v1/<first 2 hex>/<sha256>`, files 0600,
// directories 0700, writes via a temp file + rename, symlinks never followed.
// Reads re-hash the content and treat a mismatch as a miss (and delete it).
// An in-memory index (size, last use) built at open replaces the
// reference's full rescan after every write; eviction removes the least
// recently used files until the total fits the capacity.
// Best effort: I/O errors make the tier behave as a miss, never fail a request.
// Thread-safe; several servers may share one directory (flock on v1/).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "store/blob.h"

namespace kc::store {

class DiskTier {
 public:
  // capacity 0 or an empty dir disables the tier.
  DiskTier(std::filesystem::path dir, uint64_t capacity_bytes);

  bool enabled() const { return enabled_; }
  void Put(const Blob& blob);
  BlobPtr Get(const std::string& sha256);
  // From the index alone (no read, no re-hash).
  bool Contains(const std::string& sha256) const;

  uint64_t size_bytes() const;

 private:
  void LoadIndex();
  // Requires mu_ and the flock on `v1_fd`. Unlinks least recently used files.
  void EvictLocked(int v1_fd);
  // Inserts `sha256` or marks it most recently used. Requires mu_.
  void TouchLocked(const std::string& sha256, uint64_t size);
  // Drops `sha256` from the index (the file is gone). Requires mu_.
  void ForgetLocked(const std::string& sha256);
  void Forget(const std::string& sha256);

  const std::filesystem::path dir_;
  const uint64_t capacity_bytes_;
  bool enabled_ = false;

  mutable std::mutex mu_;
  struct Entry {
    uint64_t size;
    uint64_t last_use;  // logical clock; bigger = more recent
  };
  std::unordered_map<std::string, Entry> index_;  // guarded by mu_
  uint64_t clock_ = 0;                            // guarded by mu_
  uint64_t size_bytes_ = 0;                       // guarded by mu_
  std::map<uint64_t, std::string> by_use_;        // last_use -> sha256; guarded by mu_
};

}  // namespace kc::store
