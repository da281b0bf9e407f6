#include "native/staged_copy.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "native/cuda_status.h"

namespace kc::native {
namespace {

constexpr size_t kChunkBytes = size_t{4} << 20;
constexpr size_t kChunksPerLane = 2;  // one filled by the host while the other's DMA runs
constexpr int kMaxLanes = 16;
// A lane is worth its thread only with a few chunks to copy.
constexpr size_t kMinLaneBytes = 4 * kChunkBytes;
// Slices start on page boundaries, so no page is faulted in by two lanes.
constexpr size_t kSliceAlignment = 4096;

// One lane's pinned chunks, allocated on its first use and kept for the process's life, like
// the L2 flush buffer.
struct Lane {
  std::array<void*, kChunksPerLane> chunks{};
  std::array<cudaEvent_t, kChunksPerLane> copied{};  // recorded after each chunk's DMA
  bool ready = false;

  Status Prepare() {
    if (ready) return Status::Ok();
    for (size_t i = 0; i < kChunksPerLane; ++i) {
      if (chunks[i] == nullptr) {
        KC_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&chunks[i], kChunkBytes, cudaHostAllocDefault));
      }
      if (copied[i] == nullptr) {
        KC_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming));
      }
    }
    ready = true;
    return Status::Ok();
  }

  // Copies one slice, chunk by chunk: the host copy into one chunk overlaps the DMA out of
  // the other.
  Status Copy(const char* from, char* to, size_t bytes, cudaStream_t stream) {
    KC_RETURN_IF_ERROR(Prepare());
    for (size_t offset = 0, turn = 0; offset < bytes;
         offset += kChunkBytes, turn = (turn + 1) % kChunksPerLane) {
      const size_t n = std::min(kChunkBytes, bytes - offset);
      // The chunk's previous DMA (this call's or an earlier one's) has left it.
      KC_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(copied[turn]));
      std::memcpy(chunks[turn], from + offset, n);
      KC_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(to + offset, chunks[turn], n, cudaMemcpyHostToDevice, stream));
      KC_CUDA_RETURN_IF_ERROR(cudaEventRecord(copied[turn], stream));
    }
    return Status::Ok();
  }
};

std::array<Lane, kMaxLanes>& Lanes() {
  static std::array<Lane, kMaxLanes> lanes;  // never freed: the context ends with the process
  return lanes;
}

// At most `lanes` (and kMaxLanes), each with a slice of at least kMinLaneBytes; one at least.
int LaneCount(size_t bytes, int lanes) {
  const size_t most = std::max<size_t>(1, bytes / kMinLaneBytes);
  return static_cast<int>(std::min<size_t>(
      {static_cast<size_t>(std::max(lanes, 1)), static_cast<size_t>(kMaxLanes), most}));
}

}  // namespace

Status CopyToDeviceStaged(const void* source, void* destination, size_t bytes, cudaStream_t stream,
                          int lanes) {
  // One call at a time: the lanes' chunks are shared by every call.
  static std::mutex in_use;
  std::lock_guard<std::mutex> lock(in_use);
  const int count = LaneCount(bytes, lanes);
  size_t slice = (bytes + count - 1) / count;
  slice = (slice + kSliceAlignment - 1) / kSliceAlignment * kSliceAlignment;

  const auto* from = static_cast<const char*>(source);
  auto* to = static_cast<char*>(destination);
  int device = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::vector<Status> results(count, Status::Ok());
  auto run_lane = [&](int i) {
    const size_t start = std::min(bytes, static_cast<size_t>(i) * slice);
    const size_t n = std::min(slice, bytes - start);
    results[i] = Lanes()[i].Copy(from + start, to + start, n, stream);
  };
  std::vector<std::thread> helpers;
  for (int i = 1; i < count; ++i) {
    helpers.emplace_back([&, i] {
      // A new thread's current device is 0 until it is told otherwise.
      if (cudaError_t error = cudaSetDevice(device); error != cudaSuccess) {
        results[i] = CudaStatus(error, "cudaSetDevice", __FILE__, __LINE__);
        return;
      }
      run_lane(i);
    });
  }
  run_lane(0);
  for (std::thread& helper : helpers)
    helper.join();
  for (const Status& result : results) {
    if (!result.ok()) return result;
  }
  return Status::Ok();
}

}  // namespace kc::native
