// A worker's first host allocations, served from pages it already has.
//
// A fresh process gets every page of a large allocation from the kernel at its first touch:
// in a GPU worker on the H200 that cost ~3 us a page, 2,050 faults (6 ms) for the seed's two
// 4 MiB `.cpu()` copies and 4,065 more in torch.testing's temporaries, all of it under the
// GPU lease. WarmHeap, called once before the worker reports ready, touches `bytes` of glibc's
// main heap and frees them again, with glibc told to keep them: allocations up to 32 MiB come
// from the heap (not from mmap, which returns pages on free), and the heap is trimmed only past
// `bytes` and 32 MiB more.
//
// Usage (worker bootstrap, after fork, before serving):
//   WarmHeap(64 << 20);
#pragma once

#include <cstddef>

namespace kc::worker {

void WarmHeap(size_t bytes);

}  // namespace kc::worker
