// kcoral._native: the CUDA-side pieces of a GPU worker (DESIGN.md src/native): the CUPTI kernel
// timer behind builtins.benchmark, the cpu_only guard, and the end-of-request device check.
// This is the only pybind11 file of the module; everything below it returns kc::Status, turned
// into Python exceptions here (STYLE.md §3):
//   kUnavailable      -> kcoral._native.UnavailableError (CUPTI failed, no activity, no GPU)
//   kInvalidArgument  -> ValueError
//   anything else     -> kcoral._native.CallError (CUDA error during warm-up or timing; the
//                        message starts with the cudaError name)
// A Python exception raised by the benchmarked callable is re-raised unchanged (same object and
// traceback), after the CUPTI session is shut down; it is not wrapped in CallError.
//
// Process-wide state (the L2 flush buffer, the CUPTI activity client, the CUPTI subscription)
// is created on first use and deliberately never destroyed: CUPTI may call back until exit, and
// freeing device memory from static destructors races the driver's own teardown.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "native/activity_collector.h"
#include "native/cuda_guard.h"
#include "native/cuda_status.h"
#include "native/cupti_timer.h"
#include "native/device_check.h"
#include "native/l2_flush.h"

namespace py = pybind11;

namespace kc::native {
namespace {

// Strong references, kept for the interpreter's life.
PyObject* g_unavailable_error = nullptr;
PyObject* g_call_error = nullptr;

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

L2Flush& ProcessL2Flush() {
  static L2Flush* flush = new L2Flush();  // leaked on purpose, see the file comment
  return *flush;
}

py::dict Benchmark(const py::object& fn, const py::tuple& args, std::optional<int64_t> warmup,
                   std::optional<int64_t> repeat, double warmup_ms, double repeat_ms,
                   bool flush_l2) {
  if (!PyCallable_Check(fn.ptr())) Raise(PyExc_TypeError, "benchmark: fn is not callable");
  BenchmarkOptions options{warmup, repeat, warmup_ms, repeat_ms,
                           flush_l2 ? FlushMode::kBeforeEveryCall : FlushMode::kNone};

  // The callable runs with the GIL held (this thread never releases it here). Its exception is
  // kept on this side and re-raised once the timer has cleaned up.
  std::optional<py::error_already_set> raised;
  BenchmarkCall call = [&]() -> Status {
    try {
      fn(*args);
      return Status::Ok();
    } catch (py::error_already_set& error) {
      raised.emplace(std::move(error));
      return Status(StatusCode::kCancelled, "the benchmarked callable raised");
    }
  };

  ActivityCollector* collector = ValueOrThrow(ActivityCollector::Get());
  CuptiTimer timer(*collector, ProcessL2Flush());
  StatusOr<BenchmarkResult> result = timer.Run(options, call);
  if (raised) throw std::move(*raised);
  ThrowIfError(result.status());

  py::dict out;
  out["samples_ms"] = py::cast(result->samples_ms);
  out["activities_stable"] = result->activities_stable;
  out["warmup"] = result->warmup;
  out["repeat"] = result->repeat;
  out["flush_l2"] = result->flush == FlushMode::kBeforeEveryCall;
  out["estimate_ms"] = result->estimate_ms;
  return out;
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

  m.def("benchmark", &native::Benchmark, py::arg("fn"), py::arg("args"), py::kw_only(),
        py::arg("warmup").none(true), py::arg("repeat").none(true), py::arg("warmup_ms"),
        py::arg("repeat_ms"), py::arg("flush_l2"),
        "Times fn(*args) with CUPTI activity records; see src/native/cupti_timer.h.\n"
        "Returns {samples_ms, activities_stable, warmup, repeat, flush_l2, estimate_ms}\n"
        "(estimate_ms is -1.0 when both counts were explicit). A Python exception raised by\n"
        "fn propagates unchanged.");
  m.def("watch_begin", &native::WatchBegin,
        "Starts the cpu_only watch: the first CUDA runtime/driver API entry is recorded.");
  m.def("watch_end", &native::WatchEnd,
        "Stops the watch; None, or {cuda_call, location, stack, detected_ns} of the first entry.");
  m.def("device_check", &native::DeviceCheck,
        "Synchronize and read the last CUDA error: {error: None} or "
        "{error, message, sticky}.");
  m.def("l2_cache_bytes", &native::L2CacheBytes, "L2 cache size of the current device, bytes.");
  m.def("cupti_version", &native::CuptiVersion, "CUPTI API version (cuptiGetVersion).");
}
