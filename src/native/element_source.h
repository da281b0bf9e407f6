// TensorView and ElementSource: a tensor's elements, read in row-major order one chunk at a time
// into host memory, so that tensor_compare.h never holds more than a chunk per side (§10.16).
//
// HostElementSource reads host memory, strided or not; DeviceElementSource
// (device_element_source.h) copies from a CUDA device. A view does not own its memory: the
// DLPack export it came from (dlpack_export.h) must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "native/close_check.h"

namespace kc::native {

enum class MemoryKind { kHost, kCuda };

struct TensorView {
  const std::byte* data = nullptr;  // element [0, ..., 0] (DLPack's data + byte_offset)
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements, may be negative; empty: compact row-major
  MemoryKind memory = MemoryKind::kHost;
  int device_id = 0;  // the CUDA ordinal when memory is kCuda

  int64_t ElementCount() const;
  // Compact row-major: elements back to back in index order (strides of extent-1 dimensions,
  // which no index moves along, do not matter).
  bool IsCompact() const;
};

// "[2, 3]"
std::string ShapeText(const std::vector<int64_t>& shape);

class ElementSource {
 public:
  virtual ~ElementSource() = default;
  virtual const TensorView& view() const = 0;
  // Whether Read needs a staging buffer; compact host memory is read in place.
  virtual bool NeedsStaging() const = 0;
  // Elements [first, first + count) in row-major order as one contiguous host buffer: the
  // tensor's own memory, or `staging` (count * DTypeSize bytes) filled with them.
  virtual StatusOr<const std::byte*> Read(int64_t first, int64_t count, std::byte* staging) = 0;
};

class HostElementSource final : public ElementSource {
 public:
  explicit HostElementSource(TensorView view) : view_(std::move(view)) {}
  const TensorView& view() const override { return view_; }
  bool NeedsStaging() const override { return !view_.IsCompact(); }
  StatusOr<const std::byte*> Read(int64_t first, int64_t count, std::byte* staging) override;

 private:
  TensorView view_;
};

}  // namespace kc::native
