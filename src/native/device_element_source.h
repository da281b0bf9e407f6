// DeviceElementSource: a compact CUDA tensor's elements, copied to host memory one chunk at a
// time for tensor_compare.h.
//
// Only compact (contiguous row-major) tensors: a strided device tensor would need a copy per
// row, and its .contiguous() is one call away for the user, so it is refused with that advice.
// The copy is a synchronous cudaMemcpy on the legacy default stream; the caller synchronizes the
// device first so that no kernel still writes the tensor.
#pragma once

#include "base/status.h"
#include "native/element_source.h"

namespace kc::native {

class DeviceElementSource final : public ElementSource {
 public:
  // kInvalidArgument for a non-compact view; `role` ("actual") names it in the message.
  static StatusOr<DeviceElementSource> Create(TensorView view, const char* role);

  const TensorView& view() const override { return view_; }
  bool NeedsStaging() const override { return true; }
  StatusOr<const std::byte*> Read(int64_t first, int64_t count, std::byte* staging) override;

 private:
  explicit DeviceElementSource(TensorView view) : view_(std::move(view)) {}

  TensorView view_;
};

// cudaDeviceSynchronize on every CUDA device the views live on; the current device is kept.
Status SynchronizeDevicesOf(const TensorView& a, const TensorView& b);

}  // namespace kc::native
