#include <cstdint>

#include "native/cuda_status.h"
#include "native/strided_copy.h"

namespace kc::native {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

// By value to the kernel: the shape and the strides (in elements) of up to kMaxStridedDims dims.
struct Layout {
  int ndim = 0;
  int64_t shape[kMaxStridedDims] = {};
  int64_t strides[kMaxStridedDims] = {};
};

struct alignas(16) Bytes16 {
  unsigned char b[16];
};

__device__ int64_t Offset(const Layout& layout, int64_t index) {
  int64_t offset = 0;
  for (int d = layout.ndim - 1; d >= 0; --d) {
    const int64_t extent = layout.shape[d];
    offset += (index % extent) * layout.strides[d];
    index /= extent;
  }
  return offset;
}

template <typename T>
__global__ void Gather(const T* source, Layout layout, int64_t count, T* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = source[Offset(layout, i)];
  }
}

template <typename T>
__global__ void Fill(T* target, Layout layout, int64_t count, T value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    target[Offset(layout, i)] = value;
  }
}

size_t ElementBytes(const DLTensor& t) {
  return (static_cast<size_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
}

int64_t Count(const DLTensor& t) {
  int64_t count = 1;
  for (int d = 0; d < t.ndim; ++d)
    count *= t.shape[d];
  return count;
}

Layout LayoutOf(const DLTensor& t) {
  Layout layout;
  layout.ndim = t.ndim;
  int64_t compact = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    layout.shape[d] = t.shape[d];
    layout.strides[d] = t.strides != nullptr ? t.strides[d] : compact;
    compact *= t.shape[d];
  }
  return layout;
}

unsigned Blocks(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

char* First(const DLTensor& t) {
  return static_cast<char*>(t.data) + t.byte_offset;
}

template <typename T>
Status LaunchGather(const DLTensor& t, void* out, cudaStream_t stream) {
  const int64_t count = Count(t);
  if (count == 0) return Status::Ok();
  Gather<T><<<Blocks(count), kThreads, 0, stream>>>(reinterpret_cast<const T*>(First(t)),
                                                    LayoutOf(t), count, static_cast<T*>(out));
  KC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status LaunchFill(const DLTensor& t, unsigned char byte, cudaStream_t stream) {
  const int64_t count = Count(t);
  if (count == 0) return Status::Ok();
  T value;
  unsigned char* raw = reinterpret_cast<unsigned char*>(&value);
  for (size_t i = 0; i < sizeof(T); ++i)
    raw[i] = byte;
  Fill<T><<<Blocks(count), kThreads, 0, stream>>>(reinterpret_cast<T*>(First(t)), LayoutOf(t),
                                                  count, value);
  KC_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

bool CanWalk(const DLTensor& t) {
  if (t.ndim > kMaxStridedDims || t.device.device_type != kDLCUDA) return false;
  const size_t bytes = ElementBytes(t);
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8 && bytes != 16) return false;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0 || (t.strides != nullptr && t.strides[d] < 0)) return false;
  }
  return reinterpret_cast<uintptr_t>(First(t)) % bytes == 0;
}

Status EnqueueGather(const DLTensor& t, void* out, cudaStream_t stream) {
  if (!CanWalk(t)) return InvalidArgumentError("a tensor layout the strided gather cannot walk");
  switch (ElementBytes(t)) {
    case 1:
      return LaunchGather<uint8_t>(t, out, stream);
    case 2:
      return LaunchGather<uint16_t>(t, out, stream);
    case 4:
      return LaunchGather<uint32_t>(t, out, stream);
    case 8:
      return LaunchGather<uint64_t>(t, out, stream);
    default:
      return LaunchGather<Bytes16>(t, out, stream);
  }
}

Status EnqueueStridedFill(const DLTensor& t, unsigned char value, cudaStream_t stream) {
  if (!CanWalk(t)) return InvalidArgumentError("a tensor layout the strided fill cannot walk");
  switch (ElementBytes(t)) {
    case 1:
      return LaunchFill<uint8_t>(t, value, stream);
    case 2:
      return LaunchFill<uint16_t>(t, value, stream);
    case 4:
      return LaunchFill<uint32_t>(t, value, stream);
    case 8:
      return LaunchFill<uint64_t>(t, value, stream);
    default:
      return LaunchFill<Bytes16>(t, value, stream);
  }
}

}  // namespace kc::native
