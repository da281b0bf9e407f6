// MemoryTier: LRU cache of blobs for tensor, bytes and library uploads
// (spec/server.md §4). Blobs larger than a quarter of the capacity are not
// kept. Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "store/blob.h"

namespace kc::store {

class MemoryTier {
 public:
  explicit MemoryTier(size_t capacity_bytes);

  // Inserts or refreshes `blob`, evicting least recently used blobs past the
  // capacity. A request that still holds an evicted blob keeps it alive.
  // Returns whether the blob is kept (not when larger than a quarter of it).
  bool Put(const BlobPtr& blob);
  // Returns the blob and marks it most recently used, or nullptr.
  BlobPtr Get(const std::string& sha256);

  size_t size_bytes() const;
  size_t count() const;

 private:
  const size_t capacity_bytes_;

  mutable std::mutex mu_;
  std::list<BlobPtr> lru_;  // front = most recent; guarded by mu_
  std::unordered_map<std::string, std::list<BlobPtr>::iterator> index_;  // guarded by mu_
  size_t size_bytes_ = 0;                                                // guarded by mu_
};

}  // namespace kc::store
