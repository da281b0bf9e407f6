// Tensor exchange with torch through DLPack, using functions bound at worker start
// (torch._C._to_dlpack and torch._C._from_dlpack, captured before any upload is imported), so
// that user code cannot substitute what the benchmark sees by patching torch.Tensor methods.
//
// Only tensors whose type is exactly torch.Tensor are inspected: a subclass can override any
// method, and its data is not the benchmark's to copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>

#include "base/status.h"
#include "native/l2_flush.h"
#include "native/output_check.h"

namespace kc::native {

// One exported tensor. Holding it keeps the tensor's storage alive, whatever user code later
// does to the Python object (y.set_() swaps the object's storage, not this one).
class ExportedTensor {
 public:
  ExportedTensor(const ExportedTensor&) = delete;
  ExportedTensor& operator=(const ExportedTensor&) = delete;
  ~ExportedTensor();

  void* data() const;  // first element
  size_t bytes() const { return bytes_; }
  bool contiguous() const { return contiguous_; }
  bool on_cuda() const;
  ElementType type() const;
  const DLTensor& dl() const { return managed_->dl_tensor; }

 private:
  friend class TorchExchange;
  explicit ExportedTensor(DLManagedTensor* managed);

  DLManagedTensor* managed_;
  size_t bytes_ = 0;
  bool contiguous_ = false;
};

class TorchExchange {
 public:
  // Called once per worker, before user code runs; later calls are refused.
  static Status Bind(pybind11::object tensor_type, pybind11::object to_dlpack,
                     pybind11::object from_dlpack);
  static bool Bound();

  // nullopt when `object` is not exactly a torch.Tensor.
  static StatusOr<std::unique_ptr<ExportedTensor>> Export(pybind11::handle object);
  static bool IsTensor(pybind11::handle object);

  // A torch tensor shaped like `like` over `buffer`, which it keeps alive.
  static StatusOr<pybind11::object> Wrap(std::shared_ptr<DeviceBuffer> buffer,
                                         const ExportedTensor& like);
};

}  // namespace kc::native
