// Ways to copy a large uploaded tensor from its blob (a sealed memfd, mapped read-only, as a
// worker sees it) to device memory; what src/native/staged_copy.h chose from (issue 11).
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/h2d_copy bench/h2d_copy.cu && /tmp/h2d_copy [MiB]
//
// Each row maps the blob afresh (its pages are in memory, as a cached blob's are, but not
// in this mapping) and copies all of it; the device copy is then summed and checked against
// the host's sum. Pinned chunks are allocated before the timing, as in a worker that has
// copied once. Two rounds; one table row per way and round.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define CHECK_CUDA(expr)                                                         \
  do {                                                                           \
    cudaError_t check_error_ = (expr);                                           \
    if (check_error_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #expr, cudaGetErrorString(check_error_)); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChunkBytes = size_t{4} << 20;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Two pinned chunks that take turns, as a lane of staged_copy.cc.
struct Lane {
  void* chunks[2];
  cudaEvent_t copied[2];
  Lane() {
    for (int i = 0; i < 2; ++i) {
      CHECK_CUDA(cudaHostAlloc(&chunks[i], kChunkBytes, cudaHostAllocDefault));
      CHECK_CUDA(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming));
    }
  }
  void Copy(const char* from, char* to, size_t bytes, cudaStream_t stream, bool populate) {
    for (size_t offset = 0, turn = 0; offset < bytes; offset += kChunkBytes, turn ^= 1) {
      const size_t n = std::min(kChunkBytes, bytes - offset);
      CHECK_CUDA(cudaEventSynchronize(copied[turn]));
      if (populate) madvise(const_cast<char*>(from + offset), n, MADV_POPULATE_READ);
      std::memcpy(chunks[turn], from + offset, n);
      CHECK_CUDA(cudaMemcpyAsync(to + offset, chunks[turn], n, cudaMemcpyHostToDevice, stream));
      CHECK_CUDA(cudaEventRecord(copied[turn], stream));
    }
  }
};

__global__ void Sum(const unsigned* values, size_t count, unsigned long long* total) {
  unsigned long long sum = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x)
    sum += values[i];
  atomicAdd(total, sum);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024) << 20;
  int fd = memfd_create("blob", MFD_ALLOW_SEALING);
  std::vector<unsigned> block(1 << 18);
  unsigned long long expected = 0, k = 0;
  for (size_t written = 0; written < bytes; written += block.size() * sizeof(unsigned)) {
    for (unsigned& value : block)
      expected += value = static_cast<unsigned>(k++ * 2654435761u);
    if (write(fd, block.data(), block.size() * sizeof(unsigned)) < 0) return 1;
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK);

  char* device;
  unsigned long long* total;
  cudaStream_t stream;
  CHECK_CUDA(cudaMalloc(&device, bytes));
  CHECK_CUDA(cudaMalloc(&total, sizeof *total));
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<Lane> lanes(8);

  auto lanes_way = [&](int count, bool populate) {
    return [&, count, populate](const char* from) {
      std::vector<std::thread> threads;
      const size_t slice = bytes / count;  // bytes is a whole number of MiB
      for (int i = 0; i < count; ++i)
        threads.emplace_back([&, i] {
          lanes[i].Copy(from + i * slice, device + i * slice, slice, stream, populate);
        });
      for (std::thread& thread : threads)
        thread.join();
    };
  };
  std::vector<std::pair<std::string, std::function<void(const char*)>>> ways = {
      {"cudaMemcpyAsync from the mapping",
       [&](const char* from) {
         CHECK_CUDA(cudaMemcpyAsync(device, from, bytes, cudaMemcpyHostToDevice, stream));
       }},
      {"1 lane", lanes_way(1, false)},
      {"1 lane, populated per chunk", lanes_way(1, true)},
      {"2 lanes", lanes_way(2, false)},
      {"4 lanes", lanes_way(4, false)},
      {"4 lanes, populated per chunk", lanes_way(4, true)},
      {"8 lanes", lanes_way(8, false)},
      {"cudaHostRegister(read-only), one DMA",
       [&](const char* from) {
         CHECK_CUDA(cudaHostRegister(const_cast<char*>(from), bytes, cudaHostRegisterReadOnly));
         CHECK_CUDA(cudaMemcpyAsync(device, from, bytes, cudaMemcpyHostToDevice, stream));
         CHECK_CUDA(cudaStreamSynchronize(stream));
         CHECK_CUDA(cudaHostUnregister(const_cast<char*>(from)));
       }},
  };

  std::printf("%zu MiB from a sealed memfd's fresh mapping to device memory\n\n", bytes >> 20);
  std::printf("| way | round | ms | GB/s | sum |\n|---|---|---|---|---|\n");
  for (int round = 0; round < 2; ++round) {
    for (auto& [name, copy] : ways) {
      auto* from = static_cast<const char*>(mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0));
      const auto start = Clock::now();
      copy(from);
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const double ms = MsSince(start);
      munmap(const_cast<char*>(from), bytes);
      CHECK_CUDA(cudaMemsetAsync(total, 0, sizeof *total, stream));
      Sum<<<1024, 256, 0, stream>>>(reinterpret_cast<const unsigned*>(device), bytes / 4, total);
      unsigned long long got = 0;
      CHECK_CUDA(cudaMemcpyAsync(&got, total, sizeof got, cudaMemcpyDeviceToHost, stream));
      CHECK_CUDA(cudaMemsetAsync(device, 0, bytes, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      std::printf("| %s | %d | %.1f | %.2f | %s |\n", name.c_str(), round, ms, bytes / ms / 1e6,
                  got == expected ? "ok" : "WRONG");
    }
  }
  return 0;
}
