#include "pool/gpu_lease.h"

#include <algorithm>

namespace kc::pool {

std::optional<std::string> GpuLease::HolderAt(int64_t when_ns) const {
  for (int gpu : gpus_) {
    if (auto holder = arbiter_.HolderAt(gpu, when_ns)) return holder;
  }
  return std::nullopt;
}

std::vector<std::string> GpuLease::HoldersBetween(int64_t from_ns, int64_t to_ns) const {
  std::vector<std::string> holders;
  for (int gpu : gpus_) {
    for (std::string& holder : arbiter_.HoldersBetween(gpu, from_ns, to_ns)) {
      if (std::find(holders.begin(), holders.end(), holder) == holders.end())
        holders.push_back(std::move(holder));
    }
  }
  return holders;
}

int GpuLease::depth() const {
  int deepest = 0;
  for (int gpu : gpus_)
    deepest = std::max(deepest, arbiter_.depth(gpu));
  return deepest;
}

}  // namespace kc::pool
