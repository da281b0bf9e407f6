// BlobStore: the server's blob cache with its two tiers and the resolution
// step of the cache negotiation (spec/protocol.md §3.2).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "protocol/execute_request.h"
#include "store/disk_tier.h"
#include "store/memory_tier.h"

namespace kc::store {

struct BlobStoreOptions {
  size_t memory_capacity_bytes = size_t{16} << 30;
  std::filesystem::path disk_dir;  // empty: disk tier off
  uint64_t disk_capacity_bytes = uint64_t{16384} << 20;
};

struct Resolution {
  // Every referenced blob that was found, by hash (the request keeps them alive).
  std::unordered_map<std::string, BlobPtr> blobs;
  // Referenced hashes found nowhere, in first-reference order. Non-empty means
  // answer CACHE_MISS.
  std::vector<std::string> missing;
};

class BlobStore {
 public:
  explicit BlobStore(const BlobStoreOptions& options);

  // §3.2 steps 3-5: stores the request's supplied blobs (by hash) into every
  // tier that references them, then looks each referenced hash up: supplied,
  // then the tier of its use, then the other tier (a blob sent ahead with
  // POST /blobs is in memory, whatever it is used for). A tensor whose
  // available bytes have the wrong length is kInvalidArgument ("tensor upload
  // 'x' expects N bytes, got M"), even when other blobs miss.
  StatusOr<Resolution> Resolve(const protocol::Program& program,
                               const std::unordered_map<std::string, BlobPtr>& supplied);

  // A blob sent on its own (POST /blobs), for the programs that follow.
  // False when it is too large to be kept (memory_tier.h).
  bool Add(const BlobPtr& blob) { return memory_.Put(blob); }
  // Whether a program referencing `sha256` would find it (HEAD /blobs/<sha256>).
  bool Contains(const std::string& sha256);

  MemoryTier& memory() { return memory_; }
  DiskTier& disk() { return disk_; }

 private:
  MemoryTier memory_;
  DiskTier disk_;
};

}  // namespace kc::store
