#include "native/integrity_bindings.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>
#include <pybind11/stl.h>

#include "native/clock_events.h"
#include "native/cuda_status.h"
#include "native/dlpack_export.h"
#include "native/dlpack_tensor.h"
#include "native/gpu_telemetry.h"
#include "native/process_scan.h"
#include "native/python_errors.h"
#include "native/tensor_check.h"

namespace py = pybind11;

namespace kc::native {
namespace {

// nlohmann::json -> Python (dict, list, str, int, float, bool, None). Our JSON holds only
// valid UTF-8 (process_scan.h escapes process names).
py::object JsonToPython(const nlohmann::json& value) {
  using Type = nlohmann::json::value_t;
  switch (value.type()) {
    case Type::boolean:
      return py::bool_(value.get<bool>());
    case Type::number_integer:
      return py::int_(value.get<int64_t>());
    case Type::number_unsigned:
      return py::int_(value.get<uint64_t>());
    case Type::number_float:
      return py::float_(value.get<double>());
    case Type::string:
      return py::str(value.get_ref<const std::string&>());
    case Type::array: {
      py::list list;
      for (const nlohmann::json& item : value) {
        list.append(JsonToPython(item));
      }
      return list;
    }
    case Type::object: {
      py::dict dict;
      for (const auto& [key, item] : value.items()) {
        dict[py::str(key)] = JsonToPython(item);
      }
      return dict;
    }
    case Type::null:
    case Type::binary:
    case Type::discarded:
      return py::none();
  }
  return py::none();
}

// The exporter check_close reads torch tensors through is the process's one binding
// (dlpack_tensor.h TorchExchange), made before any upload is imported.
void BindExporters(const py::object& tensor_type, const py::object& to_dlpack) {
  Status bound = TorchExchange::BindExporter(tensor_type, to_dlpack);
  if (bound.code() == StatusCode::kFailedPrecondition) Raise(PyExc_RuntimeError, bound.message());
  if (!bound.ok()) Raise(PyExc_TypeError, bound.message());
}

// A DLPack capsule of `object`, without asking the object itself: instances of the bound tensor
// type go through the bound exporter; others only when their type is immutable (numpy.ndarray:
// nothing can rebind its __dlpack__), through the method found on that type.
py::object ExportCapsule(py::handle object, const char* role) {
  if (TorchExchange::IsTensorInstance(object)) return TorchExchange::ExportCapsule(object);
  PyTypeObject* type = Py_TYPE(object.ptr());
  if (PyType_HasFeature(type, Py_TPFLAGS_IMMUTABLETYPE)) {
    PyObject* method = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack__");
    if (method != nullptr) {
      py::object export_method = py::reinterpret_steal<py::object>(method);
      try {
        // A versioned export carries the read-only flag, without which numpy refuses read-only
        // arrays; producers older than DLPack 1.0 reject the keyword.
        return export_method(object, py::arg("max_version") = py::make_tuple(1, 0));
      } catch (py::error_already_set& error) {
        if (!error.matches(PyExc_TypeError)) throw;
      }
      return export_method(object);
    }
    PyErr_Clear();
  }
  Raise(PyExc_TypeError,
        std::string(role) + " is a " + type->tp_name +
            ", which check_close cannot read: pass a torch.Tensor (its exporter is bound when "
            "kcoral.builtins is imported after torch) or a numpy.ndarray");
}

// dlpack_tensor.h's ConsumeDlpackCapsule, with a TypeError naming `role` for a non-capsule.
DlpackTensor ConsumeCapsule(const py::object& capsule, const char* role) {
  StatusOr<DlpackTensor> exported = ConsumeDlpackCapsule(capsule);
  if (!exported.ok()) {
    Raise(PyExc_TypeError, std::string(role) + "'s DLPack export did not return a DLPack capsule");
  }
  return std::move(exported).value();
}

py::object CheckClose(py::handle actual, py::handle expected, double rtol, double atol) {
  // Destroyed at return, with the GIL held (a producer's deleter may touch Python objects).
  DlpackTensor actual_export = ConsumeCapsule(ExportCapsule(actual, "actual"), "actual");
  DlpackTensor expected_export = ConsumeCapsule(ExportCapsule(expected, "expected"), "expected");
  TensorView actual_view = ValueOrThrow(actual_export.View("actual"));
  TensorView expected_view = ValueOrThrow(expected_export.View("expected"));
  StatusOr<CloseResult> result = InternalError("check_close did not run");
  {
    py::gil_scoped_release unlocked;  // a large comparison takes a while; the exports keep
                                      // the memory alive
    result = CheckTensorsClose(actual_view, expected_view, Tolerance{rtol, atol});
  }
  ThrowIfError(result.status());
  return JsonToPython(ToJson(*result));
}

GpuSnapshot TakeGpuSnapshot(std::optional<int> device) {
  int ordinal = 0;
  if (device) {
    ordinal = *device;
  } else {
    cudaError_t error = cudaGetDevice(&ordinal);
    if (error != cudaSuccess) ThrowIfError(CudaStatus(error, "cudaGetDevice", __FILE__, __LINE__));
  }
  return ValueOrThrow(ReadGpuSnapshot(ordinal));
}

}  // namespace

void DefineIntegrityBindings(py::module_& m) {
  py::class_<GpuSnapshot>(m, "GpuSnapshot",
                          "One NVML reading of a GPU (src/native/gpu_snapshot.h); made by "
                          "gpu_snapshot(), compared by clock_flags().")
      .def(
          "as_dict", [](const GpuSnapshot& snapshot) { return JsonToPython(ToJson(snapshot)); },
          "{cuda_device, pci_bus_id, uuid, name, driver_version, sm_mhz, mem_mhz, app_sm_mhz,\n"
          "app_mem_mhz, default_app_sm_mhz, default_app_mem_mhz, max_sm_mhz, max_mem_mhz,\n"
          "clock_event_reasons, throttle_reasons, temp_c, power_w, errors}; null where NVML\n"
          "has no value.");
  m.def("gpu_snapshot", &TakeGpuSnapshot, py::arg("device") = py::none(),
        "Reads clocks, throttle reasons, temperature and power of a CUDA device (the current\n"
        "one by default) through NVML. UnavailableError when NVML or the GPU is missing.");
  m.def("clock_flags", &ClockFlags, py::arg("start"), py::arg("end"),
        "The flags (evidence of tampering) for a span between two GpuSnapshots: application\n"
        "clocks changed during it. Throttle reasons, an SM clock move > 5% and non-default\n"
        "application clocks are conditions (src/native/span_findings.h), not returned here.");
  m.def(
      "scan_processes", [] { return JsonToPython(ToJson(ScanNamespaceProcesses())); },
      "The other processes in this sandboxed worker's PID namespace:\n"
      "{meaningful, reason_if_not, processes: [{pid, ppid, state, comm, holds_gpu[, fd_error]}]}"
      ".");
  m.def("bind_exporters", &BindExporters, py::arg("tensor_type"), py::arg("to_dlpack"),
        "Binds, once, the tensor type and DLPack exporter check_close uses (torch.Tensor,\n"
        "torch._C._to_dlpack). RuntimeError when already bound.");
  m.def(
      "exporters_bound", [] { return TorchExchange::ExporterBound(); },
      "Whether bind_exporters has run.");
  m.def("check_close", &CheckClose, py::arg("actual"), py::arg("expected"), py::arg("rtol"),
        py::arg("atol"),
        "Compares two tensors (torch or numpy; host or CUDA) element-wise with\n"
        "|a-e| <= atol + rtol*|e| after strict shape and dtype checks. Returns {passed,\n"
        "max_abs_err, max_rel_err, mismatched, total, nonfinite_actual, nonfinite_expected,\n"
        "rtol, atol, first_mismatch, reason}. ValueError for what it cannot compare\n"
        "(unsupported dtype, non-contiguous CUDA tensor, bad tolerance), TypeError for objects\n"
        "it cannot read.");
}

}  // namespace kc::native
