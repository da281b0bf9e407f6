#include "store/memory_tier.h"

namespace kc::store {

MemoryTier::MemoryTier(size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

bool MemoryTier::Put(const BlobPtr& blob) {
  // Objects larger than a quarter of the budget are never retained (server.md §4),
  // so one large upload cannot flush the whole cache.
  if (blob == nullptr || blob->size() > capacity_bytes_ / 4) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(blob->sha256());
  if (it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return true;
  }
  lru_.push_front(blob);
  index_.emplace(blob->sha256(), lru_.begin());
  size_bytes_ += blob->size();
  while (size_bytes_ > capacity_bytes_) {
    const BlobPtr& victim = lru_.back();
    size_bytes_ -= victim->size();
    index_.erase(victim->sha256());
    lru_.pop_back();
  }
  return true;
}

BlobPtr MemoryTier::Get(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(sha256);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return *it->second;
}

size_t MemoryTier::size_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_bytes_;
}

size_t MemoryTier::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.size();
}

}  // namespace kc::store
