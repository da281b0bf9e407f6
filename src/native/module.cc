// kcoral._native: the CUDA-side pieces of a GPU worker (DESIGN.md src/native): the CUPTI kernel
// timer behind builtins.benchmark, the cpu_only guard, and the end-of-request device check.
// The bindings live here; everything below returns kc::Status, turned into Python exceptions
// here (STYLE.md §3):
//   kUnavailable      -> kcoral._native.UnavailableError (CUPTI failed, no activity, no GPU)
//   kInvalidArgument  -> ValueError
//   anything else     -> kcoral._native.CallError (CUDA error during warm-up or timing; the
//                        message starts with the cudaError name)
//   a failed output check -> kcoral._native.OutputCheckError
// A Python exception raised by the benchmarked callable is re-raised unchanged (same object and
// traceback), after the CUPTI session is shut down; it is not wrapped in CallError.
//
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "native/benchmark_entry.h"
#include "native/cuda_guard.h"
#include "native/cuda_status.h"
#include "native/device_check.h"
#include "native/l2_flush.h"
// Integrity bindings (issue 9), see the block below.
#include "native/clock_events.h"
#include "native/dlpack_export.h"
#include "native/gpu_telemetry.h"
#include "native/process_scan.h"
#include "native/tensor_check.h"

namespace py = pybind11;

namespace kc::native {
namespace {

// Strong references, kept for the interpreter's life.
PyObject* g_unavailable_error = nullptr;
PyObject* g_call_error = nullptr;
PyObject* g_output_check_error = nullptr;

[[noreturn]] void Raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

void ThrowIfError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return;
    case StatusCode::kUnavailable:
      Raise(g_unavailable_error, status.message());
    case StatusCode::kInvalidArgument:
      Raise(PyExc_ValueError, status.message());
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kInternal:
      Raise(g_call_error, status.message());
  }
  Raise(g_call_error, status.message());
}

template <typename T>
T ValueOrThrow(StatusOr<T> value) {
  ThrowIfError(value.status());
  return std::move(value).value();
}

// Options shared by benchmark and benchmark_paired; `outputs` None means the default choice.
BenchmarkRequest Request(std::optional<int64_t> warmup, std::optional<int64_t> repeat,
                         double warmup_ms, double repeat_ms, bool flush_l2,
                         std::optional<std::vector<int>> outputs, bool rotate_inputs) {
  BenchmarkRequest request;
  request.options = {warmup, repeat, warmup_ms, repeat_ms,
                     flush_l2 ? FlushMode::kBeforeEveryCall : FlushMode::kNone};
  request.rotation.rotate = rotate_inputs;
  request.rotation.outputs = std::move(outputs);
  return request;
}

py::object Run(std::vector<py::object> functions, const py::tuple& args,
               const BenchmarkRequest& request) {
  for (const py::object& fn : functions) {
    if (!PyCallable_Check(fn.ptr())) Raise(PyExc_TypeError, "benchmark: fn is not callable");
  }
  BenchmarkFailure failure;
  StatusOr<py::object> result = RunBenchmark(functions, args, request, failure);
  if (failure.raised) throw std::move(*failure.raised);
  if (failure.output_check) Raise(g_output_check_error, *failure.output_check);
  ThrowIfError(result.status());
  return std::move(result).value();
}

py::object Benchmark(const py::object& fn, const py::tuple& args, std::optional<int64_t> warmup,
                     std::optional<int64_t> repeat, double warmup_ms, double repeat_ms,
                     bool flush_l2, std::optional<std::vector<int>> outputs, bool rotate_inputs) {
  return Run({fn}, args,
             Request(warmup, repeat, warmup_ms, repeat_ms, flush_l2, std::move(outputs),
                     rotate_inputs));
}

py::object BenchmarkPaired(const py::object& candidate, const py::object& reference,
                           const py::tuple& args, std::optional<int64_t> warmup,
                           std::optional<int64_t> repeat, double warmup_ms, double repeat_ms,
                           bool flush_l2, std::optional<std::vector<int>> outputs,
                           bool rotate_inputs) {
  return Run({candidate, reference}, args,
             Request(warmup, repeat, warmup_ms, repeat_ms, flush_l2, std::move(outputs),
                     rotate_inputs));
}

void Bind(py::object tensor_type, py::object to_dlpack, py::object from_dlpack) {
  ThrowIfError(BindWorker(std::move(tensor_type), std::move(to_dlpack), std::move(from_dlpack)));
}

void WatchBegin() {
  CudaGuard* guard = ValueOrThrow(CudaGuard::Get());
  ThrowIfError(guard->Begin());
}

py::object WatchEnd() {
  CudaGuard* guard = ValueOrThrow(CudaGuard::Get());
  std::optional<CudaAccess> access = ValueOrThrow(guard->End());
  if (!access) return py::none();
  py::dict out;
  out["cuda_call"] = access->cuda_call;
  out["location"] = access->location;
  out["stack"] = access->stack;
  out["detected_ns"] = access->detected_ns;
  return out;
}

py::dict DeviceCheck() {
  DeviceHealth health;
  {
    py::gil_scoped_release unlocked;  // the synchronize may wait for long-running kernels
    health = CheckDevice();
  }
  py::dict out;
  if (health.error == cudaSuccess) {
    out["error"] = py::none();
    return out;
  }
  out["error"] = health.name;
  out["message"] = health.message;
  out["sticky"] = health.sticky;
  return out;
}

int64_t L2CacheBytes() {
  return static_cast<int64_t>(ValueOrThrow(CurrentDeviceL2Bytes()));
}

int64_t CuptiVersion() {
  uint32_t version = 0;
  CUptiResult result = cuptiGetVersion(&version);
  if (result != CUPTI_SUCCESS) {
    ThrowIfError(CuptiStatus(result, "cuptiGetVersion", __FILE__, __LINE__));
  }
  return version;
}

}  // namespace
}  // namespace kc::native

// =================================================================================================
// Integrity bindings (issue 9): GPU telemetry, the helper-process scan and check_close. Bindings
// only; the work is in gpu_telemetry.h, clock_events.h, process_scan.h and tensor_check.h.
// =================================================================================================
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

// The exporter check_close reads torch tensors through, bound once, at worker start, before any
// upload is imported: user code that later rebinds torch.Tensor.__dlpack__ or
// torch.utils.dlpack.to_dlpack does not reach the checker. Strong references, kept for the
// interpreter's life; a second binding is refused, so user code cannot swap them either.
PyObject* g_tensor_type = nullptr;  // torch.Tensor
PyObject* g_to_dlpack = nullptr;    // torch._C._to_dlpack

void BindExporters(const py::object& tensor_type, const py::object& to_dlpack) {
  if (g_tensor_type != nullptr) Raise(PyExc_RuntimeError, "the exporters are already bound");
  if (!PyType_Check(tensor_type.ptr())) Raise(PyExc_TypeError, "tensor_type must be a type");
  if (!PyCallable_Check(to_dlpack.ptr())) Raise(PyExc_TypeError, "to_dlpack must be callable");
  g_tensor_type = tensor_type.inc_ref().ptr();
  g_to_dlpack = to_dlpack.inc_ref().ptr();
}

// A DLPack capsule of `object`, without asking the object itself: instances of the bound tensor
// type go through the bound exporter; others only when their type is immutable (numpy.ndarray:
// nothing can rebind its __dlpack__), through the method found on that type.
py::object ExportCapsule(py::handle object, const char* role) {
  if (g_tensor_type != nullptr &&
      PyObject_TypeCheck(object.ptr(), reinterpret_cast<PyTypeObject*>(g_tensor_type))) {
    return py::reinterpret_borrow<py::object>(g_to_dlpack)(object);
  }
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

// Takes ownership of the capsule's tensor, renaming the capsule as DLPack asks consumers to.
DlpackTensor ConsumeCapsule(const py::object& capsule, const char* role) {
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
  Raise(PyExc_TypeError, std::string(role) + "'s DLPack export did not return a DLPack capsule");
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
        "Human-readable flags for a span between two GpuSnapshots: SM clock moved > 5%,\n"
        "throttle reasons other than idle / application clocks, application clocks changed.");
  m.def(
      "scan_processes", [] { return JsonToPython(ToJson(ScanNamespaceProcesses())); },
      "The other processes in this sandboxed worker's PID namespace:\n"
      "{meaningful, reason_if_not, processes: [{pid, ppid, state, comm, holds_gpu[, fd_error]}]}"
      ".");
  m.def("bind_exporters", &BindExporters, py::arg("tensor_type"), py::arg("to_dlpack"),
        "Binds, once, the tensor type and DLPack exporter check_close uses (torch.Tensor,\n"
        "torch._C._to_dlpack). RuntimeError when already bound.");
  m.def(
      "exporters_bound", [] { return g_tensor_type != nullptr; },
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

}  // namespace
}  // namespace kc::native
// ============================================ end of the integrity bindings ======================

PYBIND11_MODULE(_native, m) {
  namespace native = kc::native;
  m.doc() = "KCoral GPU worker natives: CUPTI benchmark timer, cpu_only CUDA guard, device check.";

  native::g_unavailable_error = PyErr_NewExceptionWithDoc(
      "kcoral._native.UnavailableError",
      "CUPTI or the GPU is unusable here (maps to kind `unavailable`).", PyExc_Exception, nullptr);
  native::g_call_error = PyErr_NewExceptionWithDoc(
      "kcoral._native.CallError", "A CUDA error during warm-up or timing (maps to kind `runtime`).",
      PyExc_Exception, nullptr);
  if (native::g_unavailable_error == nullptr || native::g_call_error == nullptr) {
    throw py::error_already_set();
  }
  // The module attributes hold their own references; the globals keep theirs forever.
  m.attr("UnavailableError") = py::reinterpret_borrow<py::object>(native::g_unavailable_error);
  m.attr("CallError") = py::reinterpret_borrow<py::object>(native::g_call_error);

  native::g_output_check_error = PyErr_NewExceptionWithDoc(
      "kcoral._native.OutputCheckError",
      "A timed call's outputs differ from the first checked call's (maps to kind `correctness`).",
      PyExc_Exception, nullptr);
  if (native::g_output_check_error == nullptr) throw py::error_already_set();
  m.attr("OutputCheckError") = py::reinterpret_borrow<py::object>(native::g_output_check_error);

  m.def("bind_worker", &native::Bind, py::arg("tensor_type"), py::arg("to_dlpack"),
        py::arg("from_dlpack"),
        "Once per worker, before user code: torch.Tensor, torch._C._to_dlpack and\n"
        "torch._C._from_dlpack, and _core's sealing capsule.");
  m.def("benchmark", &native::Benchmark, py::arg("fn"), py::arg("args"), py::kw_only(),
        py::arg("warmup").none(true), py::arg("repeat").none(true), py::arg("warmup_ms"),
        py::arg("repeat_ms"), py::arg("flush_l2"), py::arg("outputs").none(true),
        py::arg("rotate_inputs"),
        "Times fn(*args) with CUPTI activity records; see src/native/benchmark_entry.h.\n"
        "Returns the sealed result dict. A Python exception raised by fn propagates unchanged.");
  m.def("benchmark_paired", &native::BenchmarkPaired, py::arg("candidate"), py::arg("reference"),
        py::arg("args"), py::kw_only(), py::arg("warmup").none(true), py::arg("repeat").none(true),
        py::arg("warmup_ms"), py::arg("repeat_ms"), py::arg("flush_l2"),
        py::arg("outputs").none(true), py::arg("rotate_inputs"),
        "Times candidate and reference interleaved (ABBA) over the same arguments; the result\n"
        "has the candidate's keys, 'reference', and the paired ratio with its 95% interval.");
  m.def("watch_begin", &native::WatchBegin,
        "Starts the cpu_only watch: the first CUDA runtime/driver API entry is recorded.");
  m.def("watch_end", &native::WatchEnd,
        "Stops the watch; None, or {cuda_call, location, stack, detected_ns} of the first entry.");
  m.def("device_check", &native::DeviceCheck,
        "Synchronize and read the last CUDA error: {error: None} or "
        "{error, message, sticky}.");
  m.def("l2_cache_bytes", &native::L2CacheBytes, "L2 cache size of the current device, bytes.");
  m.def("cupti_version", &native::CuptiVersion, "CUPTI API version (cuptiGetVersion).");
  native::DefineIntegrityBindings(m);  // issue 9: telemetry, process scan, check_close
}
