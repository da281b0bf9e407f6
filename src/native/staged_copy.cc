#include "native/staged_copy.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "native/cuda_status.h"

namespace kc::native {
namespace {

constexpr size_t kChunkBytes = size_t{8} << 20;
constexpr size_t kChunks = 4;

struct Staging {
  std::array<void*, kChunks> chunks{};
  std::array<cudaEvent_t, kChunks> copied{};  // recorded after each chunk's DMA
  bool ready = false;
};

StatusOr<Staging*> TheStaging() {
  static Staging staging;  // never freed: the context ends with the process
  if (staging.ready) return &staging;
  for (size_t i = 0; i < kChunks; ++i) {
    if (staging.chunks[i] == nullptr) {
      KC_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&staging.chunks[i], kChunkBytes, cudaHostAllocDefault));
    }
    if (staging.copied[i] == nullptr) {
      KC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&staging.copied[i], cudaEventDisableTiming));
    }
  }
  staging.ready = true;
  return &staging;
}

}  // namespace

Status CopyToDeviceStaged(const void* source, void* destination, size_t bytes,
                          cudaStream_t stream) {
  KC_ASSIGN_OR_RETURN(Staging * staging, TheStaging());
  const auto* from = static_cast<const char*>(source);
  auto* to = static_cast<char*>(destination);
  for (size_t offset = 0, turn = 0; offset < bytes;
       offset += kChunkBytes, turn = (turn + 1) % kChunks) {
    const size_t n = std::min(kChunkBytes, bytes - offset);
    // The chunk's previous DMA (this call's or an earlier one's) has left it.
    KC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging->copied[turn]));
    std::memcpy(staging->chunks[turn], from + offset, n);
    KC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(to + offset, staging->chunks[turn], n, cudaMemcpyHostToDevice, stream));
    KC_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging->copied[turn], stream));
  }
  return Status::Ok();
}

}  // namespace kc::native
