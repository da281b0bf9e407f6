#include "native/dlpack_export.h"

#include <string>
#include <utility>

namespace kc::native {

DlpackTensor::DlpackTensor(DlpackTensor&& other) noexcept
    : legacy_(std::exchange(other.legacy_, nullptr)),
      versioned_(std::exchange(other.versioned_, nullptr)) {}

DlpackTensor& DlpackTensor::operator=(DlpackTensor&& other) noexcept {
  if (this != &other) {
    Release();
    legacy_ = std::exchange(other.legacy_, nullptr);
    versioned_ = std::exchange(other.versioned_, nullptr);
  }
  return *this;
}

void DlpackTensor::Release() noexcept {
  if (legacy_ != nullptr && legacy_->deleter != nullptr) legacy_->deleter(legacy_);
  if (versioned_ != nullptr && versioned_->deleter != nullptr) versioned_->deleter(versioned_);
  legacy_ = nullptr;
  versioned_ = nullptr;
}

StatusOr<DType> DTypeFromDlpack(DLDataType type) {
  auto unsupported = [&] {
    return InvalidArgumentError("unsupported dtype (DLPack code " + std::to_string(type.code) +
                                ", " + std::to_string(type.bits) + " bits, " +
                                std::to_string(type.lanes) + " lanes)");
  };
  if (type.lanes != 1) return unsupported();
  switch (type.code) {
    case kDLBool:
      if (type.bits == 8) return DType::kBool;
      break;
    case kDLUInt:
      if (type.bits == 8) return DType::kUInt8;
      if (type.bits == 16) return DType::kUInt16;
      if (type.bits == 32) return DType::kUInt32;
      if (type.bits == 64) return DType::kUInt64;
      break;
    case kDLInt:
      if (type.bits == 8) return DType::kInt8;
      if (type.bits == 16) return DType::kInt16;
      if (type.bits == 32) return DType::kInt32;
      if (type.bits == 64) return DType::kInt64;
      break;
    case kDLFloat:
      if (type.bits == 16) return DType::kFloat16;
      if (type.bits == 32) return DType::kFloat32;
      if (type.bits == 64) return DType::kFloat64;
      break;
    case kDLBfloat:
      if (type.bits == 16) return DType::kBFloat16;
      break;
    case kDLFloat8_e4m3fn:
      if (type.bits == 8) return DType::kFloat8E4M3Fn;
      break;
    case kDLFloat8_e5m2:
      if (type.bits == 8) return DType::kFloat8E5M2;
      break;
    default:
      break;
  }
  return unsupported();
}

StatusOr<TensorView> DlpackTensor::View(const char* role) const {
  const std::string who(role);
  if (versioned_ != nullptr && versioned_->version.major != DLPACK_MAJOR_VERSION) {
    return InvalidArgumentError(
        who + ": DLPack major version " + std::to_string(versioned_->version.major) +
        " is not supported (expected " + std::to_string(DLPACK_MAJOR_VERSION) + ")");
  }
  const DLTensor* tensor = this->tensor();
  if (tensor == nullptr) return InternalError(who + ": no DLPack tensor");

  TensorView view;
  StatusOr<DType> dtype = DTypeFromDlpack(tensor->dtype);
  if (!dtype.ok()) return dtype.status().WithContext(who);
  view.dtype = *dtype;
  switch (tensor->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: readable in place
      view.memory = MemoryKind::kHost;
      break;
    case kDLCUDA:
    case kDLCUDAManaged:
      view.memory = MemoryKind::kCuda;
      view.device_id = tensor->device.device_id;
      break;
    default:
      return InvalidArgumentError(who + ": tensors on DLPack device type " +
                                  std::to_string(tensor->device.device_type) +
                                  " are not supported (host and CUDA only)");
  }
  if (tensor->ndim < 0) return InvalidArgumentError(who + ": negative ndim");
  view.shape.assign(tensor->shape, tensor->shape + tensor->ndim);
  for (int64_t extent : view.shape) {
    if (extent < 0) return InvalidArgumentError(who + ": negative extent");
  }
  if (tensor->strides != nullptr)
    view.strides.assign(tensor->strides, tensor->strides + tensor->ndim);
  view.data = static_cast<const std::byte*>(tensor->data) + tensor->byte_offset;
  return view;
}

}  // namespace kc::native
