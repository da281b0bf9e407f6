// DlpackTensor: owns one DLPack export (for check_close; the benchmark's torch exchange is
// dlpack_tensor.h) (a legacy DLManagedTensor or a DLManagedTensorVersioned,
// taken from a "dltensor" / "dltensor_versioned" capsule) and calls its deleter once, on
// destruction; View() describes it for tensor_compare.h.
//
// Move-only. The producer's deleter may touch Python objects (numpy's drops a reference to the
// array), so destroy it with the GIL held. The export keeps the producer's memory alive, so the
// view may be read with the GIL released.
#pragma once

#include <dlpack/dlpack.h>

#include "base/status.h"
#include "native/element_source.h"

namespace kc::native {

class DlpackTensor {
 public:
  static DlpackTensor FromLegacy(DLManagedTensor* managed) {
    return DlpackTensor(managed, nullptr);
  }
  static DlpackTensor FromVersioned(DLManagedTensorVersioned* managed) {
    return DlpackTensor(nullptr, managed);
  }
  DlpackTensor(DlpackTensor&& other) noexcept;
  DlpackTensor& operator=(DlpackTensor&& other) noexcept;
  DlpackTensor(const DlpackTensor&) = delete;
  DlpackTensor& operator=(const DlpackTensor&) = delete;
  ~DlpackTensor() { Release(); }

  // kInvalidArgument, naming `role` ("actual"), for what check_close cannot read: an unknown
  // DLPack major version, vector lanes, a dtype outside close_check.h's DType, a negative
  // extent, memory that is neither host nor CUDA.
  StatusOr<TensorView> View(const char* role) const;

  // The owned tensor; nullptr for a moved-from DlpackTensor.
  const DLTensor* tensor() const {
    return legacy_ != nullptr      ? &legacy_->dl_tensor
           : versioned_ != nullptr ? &versioned_->dl_tensor
                                   : nullptr;
  }

 private:
  DlpackTensor(DLManagedTensor* legacy, DLManagedTensorVersioned* versioned)
      : legacy_(legacy), versioned_(versioned) {}
  void Release() noexcept;

  DLManagedTensor* legacy_ = nullptr;
  DLManagedTensorVersioned* versioned_ = nullptr;
};

// DLPack's (code, bits, lanes == 1) as a DType; kInvalidArgument otherwise.
StatusOr<DType> DTypeFromDlpack(DLDataType type);

}  // namespace kc::native
