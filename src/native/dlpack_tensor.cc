#include "native/dlpack_tensor.h"

#include <string>
#include <utility>

namespace kc::native {
namespace py = pybind11;
namespace {

struct BoundFunctions {
  py::object tensor_type;
  py::object to_dlpack;
  py::object from_dlpack;
};

// Leaked on purpose: the interpreter may tear modules down before static destructors run.
BoundFunctions* g_bound = nullptr;

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

ExportedTensor::ExportedTensor(DLManagedTensor* managed) : managed_(managed) {
  const DLTensor& t = managed->dl_tensor;
  size_t count = 1;
  for (int d = 0; d < t.ndim; ++d) count *= static_cast<size_t>(t.shape[d]);
  bytes_ = count * ElementBytes(t.dtype);
  contiguous_ = IsContiguous(t);
}

ExportedTensor::~ExportedTensor() {
  if (managed_->deleter != nullptr) managed_->deleter(managed_);
}

void* ExportedTensor::data() const {
  return static_cast<char*>(managed_->dl_tensor.data) + managed_->dl_tensor.byte_offset;
}

bool ExportedTensor::on_cuda() const {
  return managed_->dl_tensor.device.device_type == kDLCUDA;
}

ElementType ExportedTensor::type() const {
  return {managed_->dl_tensor.dtype.code, managed_->dl_tensor.dtype.bits};
}

Status TorchExchange::Bind(py::object tensor_type, py::object to_dlpack, py::object from_dlpack) {
  if (g_bound != nullptr) return FailedPreconditionError("the torch exchange is bound already");
  g_bound = new BoundFunctions{std::move(tensor_type), std::move(to_dlpack), std::move(from_dlpack)};
  return Status::Ok();
}

bool TorchExchange::Bound() { return g_bound != nullptr; }

bool TorchExchange::IsTensor(py::handle object) {
  return g_bound != nullptr && Py_TYPE(object.ptr()) ==
                                   reinterpret_cast<PyTypeObject*>(g_bound->tensor_type.ptr());
}

StatusOr<std::unique_ptr<ExportedTensor>> TorchExchange::Export(py::handle object) {
  if (!IsTensor(object)) return InvalidArgumentError("not a torch.Tensor");
  py::object capsule = g_bound->to_dlpack(object);
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
    return InternalError("to_dlpack did not return a DLPack capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  // Consumed: the capsule no longer frees it; the ExportedTensor does.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  return std::unique_ptr<ExportedTensor>(new ExportedTensor(managed));
}

StatusOr<py::object> TorchExchange::Wrap(std::shared_ptr<DeviceBuffer> buffer,
                                         const ExportedTensor& like) {
  if (g_bound == nullptr) return FailedPreconditionError("the torch exchange is not bound");
  auto lent = std::make_unique<Lent>();
  const DLTensor& model = like.dl();
  lent->shape.assign(model.shape, model.shape + model.ndim);
  lent->buffer = std::move(buffer);
  DLTensor& t = lent->managed.dl_tensor;
  t.data = lent->buffer->data();
  t.device = model.device;
  t.ndim = model.ndim;
  t.dtype = model.dtype;
  t.shape = lent->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  lent->managed.manager_ctx = lent.get();
  lent->managed.deleter = DeleteLent;
  PyObject* capsule = PyCapsule_New(&lent->managed, "dltensor", DestroyUnconsumedCapsule);
  if (capsule == nullptr) throw py::error_already_set();
  lent.release();  // owned by the capsule, then by torch
  return g_bound->from_dlpack(py::reinterpret_steal<py::object>(capsule));
}

}  // namespace kc::native
