#include "native/dlpack_tensor.h"

#include <string>
#include <utility>

namespace kc::native {
namespace py = pybind11;
namespace {

// Strong references, leaked on purpose: the interpreter may tear modules down before static
// destructors run.
PyObject* g_tensor_type = nullptr;  // torch.Tensor
PyObject* g_to_dlpack = nullptr;    // torch._C._to_dlpack
PyObject* g_from_dlpack = nullptr;  // torch._C._from_dlpack

size_t ElementBytes(const DLDataType& type) {
  return (static_cast<size_t>(type.bits) * type.lanes + 7) / 8;
}

bool IsContiguous(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

// A tensor we allocated, lent to torch: the DLManagedTensor owns a reference to the buffer.
struct Lent {
  std::shared_ptr<DeviceBuffer> buffer;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

void DeleteLent(DLManagedTensor* managed) {
  delete static_cast<Lent*>(managed->manager_ctx);
}

void DestroyUnconsumedCapsule(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }
}

}  // namespace

StatusOr<DlpackTensor> ConsumeDlpackCapsule(py::handle capsule) {
  PyObject* raw = capsule.ptr();
  if (PyCapsule_IsValid(raw, "dltensor_versioned")) {
    auto* managed =
        static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(raw, "dltensor_versioned"));
    if (PyCapsule_SetName(raw, "used_dltensor_versioned") != 0) throw py::error_already_set();
    return DlpackTensor::FromVersioned(managed);
  }
  if (PyCapsule_IsValid(raw, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(raw, "dltensor"));
    if (PyCapsule_SetName(raw, "used_dltensor") != 0) throw py::error_already_set();
    return DlpackTensor::FromLegacy(managed);
  }
  return InvalidArgumentError("the DLPack export did not return a DLPack capsule");
}

ExportedTensor::ExportedTensor(DlpackTensor exported) : export_(std::move(exported)) {
  const DLTensor& t = dl();
  size_t count = 1;
  for (int d = 0; d < t.ndim; ++d)
    count *= static_cast<size_t>(t.shape[d]);
  bytes_ = count * ElementBytes(t.dtype);
  contiguous_ = count == 0 || IsContiguous(t);
  span_bytes_ = bytes_;
  if (!contiguous_ && count > 0) {
    int64_t last = 0;  // the last element's offset, in elements
    for (int d = 0; d < t.ndim; ++d) {
      forward_strides_ = forward_strides_ && t.strides[d] >= 0;
      last += (t.shape[d] - 1) * t.strides[d];
    }
    span_bytes_ = forward_strides_ ? static_cast<size_t>(last + 1) * ElementBytes(t.dtype) : 0;
  }
}

void* ExportedTensor::data() const {
  return static_cast<char*>(dl().data) + dl().byte_offset;
}

Status TorchExchange::BindExporter(py::object tensor_type, py::object to_dlpack) {
  if (g_tensor_type != nullptr) return FailedPreconditionError("the exporters are already bound");
  if (!PyType_Check(tensor_type.ptr())) return InvalidArgumentError("tensor_type must be a type");
  if (!PyCallable_Check(to_dlpack.ptr())) return InvalidArgumentError("to_dlpack must be callable");
  g_tensor_type = tensor_type.release().ptr();
  g_to_dlpack = to_dlpack.release().ptr();
  return Status::Ok();
}

Status TorchExchange::BindImporter(py::object from_dlpack) {
  if (g_from_dlpack != nullptr) return FailedPreconditionError("the importer is already bound");
  if (!PyCallable_Check(from_dlpack.ptr())) {
    return InvalidArgumentError("from_dlpack must be callable");
  }
  g_from_dlpack = from_dlpack.release().ptr();
  return Status::Ok();
}

bool TorchExchange::ExporterBound() {
  return g_tensor_type != nullptr;
}

bool TorchExchange::Bound() {
  return g_tensor_type != nullptr && g_from_dlpack != nullptr;
}

bool TorchExchange::IsTensor(py::handle object) {
  return g_tensor_type != nullptr &&
         Py_TYPE(object.ptr()) == reinterpret_cast<PyTypeObject*>(g_tensor_type);
}

bool TorchExchange::IsTensorInstance(py::handle object) {
  return g_tensor_type != nullptr &&
         PyObject_TypeCheck(object.ptr(), reinterpret_cast<PyTypeObject*>(g_tensor_type));
}

py::object TorchExchange::ExportCapsule(py::handle object) {
  return py::reinterpret_borrow<py::object>(g_to_dlpack)(object);
}

StatusOr<std::unique_ptr<ExportedTensor>> TorchExchange::Export(py::handle object) {
  if (!IsTensor(object)) return InvalidArgumentError("not a torch.Tensor");
  return ExportInstance(object);
}

StatusOr<std::unique_ptr<ExportedTensor>> TorchExchange::ExportInstance(py::handle object) {
  if (!IsTensorInstance(object)) return InvalidArgumentError("not a torch.Tensor");
  KC_ASSIGN_OR_RETURN(DlpackTensor exported, ConsumeDlpackCapsule(ExportCapsule(object)));
  return std::make_unique<ExportedTensor>(std::move(exported));
}

StatusOr<py::object> TorchExchange::Wrap(std::shared_ptr<DeviceBuffer> buffer,
                                         const ExportedTensor& like) {
  if (g_from_dlpack == nullptr) return FailedPreconditionError("the torch importer is not bound");
  auto lent = std::make_unique<Lent>();
  const DLTensor& model = like.dl();
  lent->shape.assign(model.shape, model.shape + model.ndim);
  if (!like.contiguous()) lent->strides.assign(model.strides, model.strides + model.ndim);
  lent->buffer = std::move(buffer);
  DLTensor& t = lent->managed.dl_tensor;
  t.data = lent->buffer->data();
  t.device = model.device;
  t.ndim = model.ndim;
  t.dtype = model.dtype;
  t.shape = lent->shape.data();
  t.strides = lent->strides.empty() ? nullptr : lent->strides.data();  // null: row-major
  t.byte_offset = 0;
  lent->managed.manager_ctx = lent.get();
  lent->managed.deleter = DeleteLent;
  PyObject* capsule = PyCapsule_New(&lent->managed, "dltensor", DestroyUnconsumedCapsule);
  if (capsule == nullptr) throw py::error_already_set();
  lent.release();  // owned by the capsule, then by torch
  return py::reinterpret_borrow<py::object>(g_from_dlpack)(
      py::reinterpret_steal<py::object>(capsule));
}

}  // namespace kc::native
