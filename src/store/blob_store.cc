#include "store/blob_store.h"

#include <utility>

namespace kc::store {

namespace {

const protocol::BlobReference* FindReference(const protocol::Program& program,
                                             const std::string& sha256) {
  for (const protocol::BlobReference& reference : program.blobs) {
    if (reference.sha256 == sha256) return &reference;
  }
  return nullptr;
}

}  // namespace

BlobStore::BlobStore(const BlobStoreOptions& options)
    : memory_(options.memory_capacity_bytes),
      disk_(options.disk_dir, options.disk_capacity_bytes) {}

StatusOr<Resolution> BlobStore::Resolve(const protocol::ExecuteRequest& request) {
  const protocol::Program& program = request.program;

  // Step 3: supplied bytes go into every tier that references them before any
  // lookup, so a partially supplied retry still warms the caches.
  std::unordered_map<std::string, BlobPtr> supplied;
  for (const protocol::SuppliedBlob& part : request.blobs) {
    // The parser rejects unreferenced parts; one that slips through is not cached.
    const protocol::BlobReference* reference = FindReference(program, part.sha256);
    if (reference == nullptr || supplied.contains(part.sha256)) continue;
    StatusOr<BlobPtr> blob = Blob::FromBytes(part.sha256, part.bytes);
    if (!blob.ok()) return blob.status().WithContext("blob " + part.sha256);
    if (reference->used_by_file) disk_.Put(**blob);
    if (reference->used_by_memory) memory_.Put(*blob);
    supplied.emplace(part.sha256, *std::move(blob));
  }

  // Step 4: supplied, else disk (file uploads), else memory (other uploads).
  Resolution resolution;
  for (const protocol::BlobReference& reference : program.blobs) {
    BlobPtr blob;
    if (auto it = supplied.find(reference.sha256); it != supplied.end()) blob = it->second;
    if (blob == nullptr && reference.used_by_file) blob = disk_.Get(reference.sha256);
    if (blob == nullptr && reference.used_by_memory) blob = memory_.Get(reference.sha256);
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
