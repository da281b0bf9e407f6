#include "store/blob_store.h"

#include <utility>

namespace kc::store {

BlobStore::BlobStore(const BlobStoreOptions& options)
    : memory_(options.memory_capacity_bytes),
      disk_(options.disk_dir, options.disk_capacity_bytes) {}

bool BlobStore::Contains(const std::string& sha256) {
  return memory_.Get(sha256) != nullptr || disk_.Contains(sha256);
}

StatusOr<Resolution> BlobStore::Resolve(const protocol::Program& program,
                                        const std::unordered_map<std::string, BlobPtr>& supplied) {
  // Step 3: supplied bytes go into every tier that references them before any
  // lookup, so a partially supplied retry still warms the caches. (The parser
  // rejects unreferenced parts.)
  for (const protocol::BlobReference& reference : program.blobs) {
    auto it = supplied.find(reference.sha256);
    if (it == supplied.end()) continue;
    if (reference.used_by_file) disk_.Put(*it->second);
    if (reference.used_by_memory) memory_.Put(it->second);
  }

  // Step 4: supplied, else the tier of its use, else the other one; a blob
  // found in the other tier is copied into the tier of its use.
  Resolution resolution;
  for (const protocol::BlobReference& reference : program.blobs) {
    BlobPtr blob;
    if (auto it = supplied.find(reference.sha256); it != supplied.end()) blob = it->second;
    if (blob == nullptr && reference.used_by_file) blob = disk_.Get(reference.sha256);
    if (blob == nullptr && reference.used_by_memory) blob = memory_.Get(reference.sha256);
    if (blob == nullptr && reference.used_by_file) {
      if ((blob = memory_.Get(reference.sha256))) disk_.Put(*blob);
    }
    if (blob == nullptr && reference.used_by_memory) {
      if ((blob = disk_.Get(reference.sha256))) memory_.Put(blob);
    }
    if (blob == nullptr) {
      resolution.missing.push_back(reference.sha256);
    } else {
      resolution.blobs.emplace(reference.sha256, std::move(blob));
    }
  }

  // Step 5: tensor lengths are checked against whatever is available, before
  // CACHE_MISS, so a wrong length is reported even when other blobs miss.
  for (const protocol::BlobReference& reference : program.blobs) {
    if (!reference.tensor_bytes.has_value()) continue;
    auto it = resolution.blobs.find(reference.sha256);
    if (it == resolution.blobs.end()) continue;
    if (it->second->size() != *reference.tensor_bytes) {
      return InvalidArgumentError("tensor upload '" + reference.tensor_upload_id + "' expects " +
                                  std::to_string(*reference.tensor_bytes) + " bytes, got " +
                                  std::to_string(it->second->size()));
    }
  }
  return resolution;
}

}  // namespace kc::store
