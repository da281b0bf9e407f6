#include "worker/warm_heap.h"

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace kc::worker {
namespace {

constexpr size_t kLargestHeapAllocation = size_t{32} << 20;  // glibc's cap on M_MMAP_THRESHOLD
constexpr size_t kBlock = size_t{1} << 20;
constexpr size_t kPage = 4096;

}  // namespace

void WarmHeap(size_t bytes) {
  if (bytes == 0) return;
  ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargestHeapAllocation));
  const size_t trim = bytes + kLargestHeapAllocation;
  ::mallopt(M_TRIM_THRESHOLD, trim > INT32_MAX ? INT32_MAX : static_cast<int>(trim));
  std::vector<void*> blocks;
  blocks.reserve(bytes / kBlock + 1);
  for (size_t done = 0; done < bytes; done += kBlock) {
    auto* block = static_cast<volatile char*>(std::malloc(kBlock));
    if (block == nullptr) break;  // what was touched so far still helps
    for (size_t offset = 0; offset < kBlock; offset += kPage)
      block[offset] = 0;
    blocks.push_back(const_cast<char*>(block));
  }
  // Freed from the top down, they merge into the heap's top chunk, which stays (trim above).
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    std::free(*it);
}

}  // namespace kc::worker
