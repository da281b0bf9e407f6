// Tensor exchange with torch through DLPack, using functions bound at worker start
// (torch._C._to_dlpack and torch._C._from_dlpack, captured before any upload is imported), so
// that user code cannot substitute what the benchmark sees by patching torch.Tensor methods.
//
// Arguments are inspected only when their type is exactly torch.Tensor (a subclass can override
// any method, and its data is not the benchmark's to copy); a returned subclass (nn.Parameter, a
// lazy tensor) is exported for what its storage holds, which is what the caller gets.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <pybind11/pybind11.h>

#include "base/status.h"
#include "native/dlpack_export.h"
#include "native/l2_flush.h"
#include "native/output_check.h"

namespace kc::native {

// Takes ownership of a "dltensor" or "dltensor_versioned" capsule's tensor, renaming the capsule
// as DLPack asks consumers to. kInvalidArgument when `capsule` is neither.
StatusOr<DlpackTensor> ConsumeDlpackCapsule(pybind11::handle capsule);

// One exported tensor. Holding it keeps the tensor's storage alive, whatever user code later
// does to the Python object (y.set_() swaps the object's storage, not this one).
class ExportedTensor {
 public:
  explicit ExportedTensor(DlpackTensor exported);

  void* data() const;                      // first element
  size_t bytes() const { return bytes_; }  // of the elements
  bool contiguous() const { return contiguous_; }
  // The bytes from the first element to the end of the last one: bytes() when contiguous; for a
  // view with gaps (a slice, a transpose), the gaps too. 0 for a tensor without elements.
  size_t span_bytes() const { return span_bytes_; }
  // Strides that are not negative, so that the span starts at data().
  bool forward_strides() const { return forward_strides_; }
  bool on_cuda() const { return dl().device.device_type == kDLCUDA; }
  ElementType type() const { return {dl().dtype.code, dl().dtype.bits}; }
  const DLTensor& dl() const { return *export_.tensor(); }

 private:
  DlpackTensor export_;
  size_t bytes_ = 0;
  size_t span_bytes_ = 0;
  bool contiguous_ = false;
  bool forward_strides_ = true;
};

// The process's one binding of torch's exchange functions, shared by the benchmark and by
// check_close (integrity_bindings.cc). Each half is bound once, before user code runs (the
// exporter when kcoral.builtins is imported after torch, or at the GPU worker's initialize; the
// importer at initialize); later binding is refused, so user code cannot swap them.
class TorchExchange {
 public:
  static Status BindExporter(pybind11::object tensor_type, pybind11::object to_dlpack);
  static Status BindImporter(pybind11::object from_dlpack);
  static bool ExporterBound();
  static bool Bound();  // both halves

  // Exactly a torch.Tensor (a subclass can override any method).
  static bool IsTensor(pybind11::handle object);
  // An instance of torch.Tensor or of a subclass.
  static bool IsTensorInstance(pybind11::handle object);
  // The bound exporter's capsule for an instance (IsTensorInstance).
  static pybind11::object ExportCapsule(pybind11::handle object);
  // Export() of an exact torch.Tensor, owning the capsule's tensor.
  static StatusOr<std::unique_ptr<ExportedTensor>> Export(pybind11::handle object);
  // The same for a torch.Tensor or a subclass instance: torch's exporter reads the storage
  // without dispatching to the subclass.
  static StatusOr<std::unique_ptr<ExportedTensor>> ExportInstance(pybind11::handle object);

  // A torch tensor shaped (and strided) like `like` over `buffer` (of like.span_bytes()), which
  // it keeps alive.
  static StatusOr<pybind11::object> Wrap(std::shared_ptr<DeviceBuffer> buffer,
                                         const ExportedTensor& like);
};

}  // namespace kc::native
