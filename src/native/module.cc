// kcoral._native: the CUDA-side pieces of a GPU worker (DESIGN.md src/native): the CUPTI kernel
// timer behind builtins.benchmark, the cpu_only guard, and the end-of-request device check.
// The bindings live here (those of the integrity checks in integrity_bindings.cc); everything
// below returns kc::Status, turned into Python exceptions as python_errors.h says.
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
#include "native/integrity_bindings.h"
#include "native/l2_flush.h"
#include "native/python_errors.h"
#include "native/staged_copy.h"

namespace py = pybind11;

namespace kc::native {
namespace {

// The cfg keys shared by benchmark and benchmark_paired (gpu_benchmark.py checks their types).
struct Cfg {
  std::optional<int64_t> warmup;
  std::optional<int64_t> repeat;
  double warmup_ms = 25.0;
  double repeat_ms = 100.0;
  bool flush_l2 = true;
  std::optional<std::vector<int>> outputs;  // None: found by the probes
  bool rotate_inputs = true;
  std::optional<std::pair<double, double>> tolerance;  // (rtol, atol)
  bool launch_gate = true;
  std::vector<std::string> unverifiable;  // "return...", "arg:N" (gpu_benchmark.py checks them)
  std::vector<std::string> constants;     // "return..." paths
};

BenchmarkRequest Request(Cfg cfg) {
  BenchmarkRequest request;
  request.options.warmup = cfg.warmup;
  request.options.repeat = cfg.repeat;
  request.options.warmup_ms = cfg.warmup_ms;
  request.options.repeat_ms = cfg.repeat_ms;
  request.options.flush = cfg.flush_l2 ? FlushMode::kBeforeEveryCall : FlushMode::kNone;
  request.options.launch_gate = cfg.launch_gate;
  request.rotation.rotate = cfg.rotate_inputs;
  request.rotation.outputs = std::move(cfg.outputs);
  if (cfg.tolerance) {
    request.rotation.tolerance = OutputTolerance{static_cast<float>(cfg.tolerance->first),
                                                 static_cast<float>(cfg.tolerance->second)};
  }
  request.returns.tolerance = request.rotation.tolerance;
  for (const std::string& name : cfg.unverifiable) {
    if (name.rfind("arg:", 0) == 0) {
      request.rotation.unverifiable.push_back(std::stoi(name.substr(4)));
    } else {
      request.returns.unverifiable.push_back(name);
    }
  }
  request.returns.constants = std::move(cfg.constants);
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
  if (failure.output_check) Raise(OutputCheckErrorType(), *failure.output_check);
  ThrowIfError(result.status());
  return std::move(result).value();
}

py::object Benchmark(const py::object& fn, const py::tuple& args, std::optional<int64_t> warmup,
                     std::optional<int64_t> repeat, double warmup_ms, double repeat_ms,
                     bool flush_l2, std::optional<std::vector<int>> outputs, bool rotate_inputs,
                     std::optional<std::pair<double, double>> tolerance, bool launch_gate,
                     std::vector<std::string> unverifiable, std::vector<std::string> constants) {
  return Run(
      {fn}, args,
      Request({warmup, repeat, warmup_ms, repeat_ms, flush_l2, std::move(outputs), rotate_inputs,
               tolerance, launch_gate, std::move(unverifiable), std::move(constants)}));
}

py::object BenchmarkPaired(const py::object& candidate, const py::object& reference,
                           const py::tuple& args, std::optional<int64_t> warmup,
                           std::optional<int64_t> repeat, double warmup_ms, double repeat_ms,
                           bool flush_l2, std::optional<std::vector<int>> outputs,
                           bool rotate_inputs, std::optional<std::pair<double, double>> tolerance,
                           bool launch_gate, std::vector<std::string> unverifiable,
                           std::vector<std::string> constants) {
  return Run(
      {candidate, reference}, args,
      Request({warmup, repeat, warmup_ms, repeat_ms, flush_l2, std::move(outputs), rotate_inputs,
               tolerance, launch_gate, std::move(unverifiable), std::move(constants)}));
}

void Bind(py::object tensor_type, py::object to_dlpack, py::object from_dlpack) {
  ThrowIfError(BindWorker(std::move(tensor_type), std::move(to_dlpack), std::move(from_dlpack)));
}

void PrepareTimerOrThrow() {
  ThrowIfError(PrepareTimer());
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

// `source` is any buffer (a blob's read-only mapping); the GIL is released while it is read,
// so the buffer is held by the caller for the call.
void CopyToDevice(const py::buffer& source, uintptr_t destination, uintptr_t stream, int lanes) {
  const py::buffer_info info = source.request();
  py::ssize_t contiguous_stride = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != contiguous_stride)
      Raise(PyExc_ValueError, "copy_to_device: the buffer is not contiguous");
    contiguous_stride *= info.shape[d];
  }
  const size_t bytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
  Status status;
  {
    py::gil_scoped_release unlocked;
    status = CopyToDeviceStaged(info.ptr, reinterpret_cast<void*>(destination), bytes,
                                reinterpret_cast<cudaStream_t>(stream), lanes);
  }
  ThrowIfError(status);
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

  native::DefineExceptions(m);

  m.def("bind_worker", &native::Bind, py::arg("tensor_type"), py::arg("to_dlpack"),
        py::arg("from_dlpack"),
        "Once per worker, before user code: torch.Tensor, torch._C._to_dlpack and\n"
        "torch._C._from_dlpack, and _core's sealing capsule.");
  m.def("benchmark", &native::Benchmark, py::arg("fn"), py::arg("args"), py::kw_only(),
        py::arg("warmup").none(true), py::arg("repeat").none(true), py::arg("warmup_ms"),
        py::arg("repeat_ms"), py::arg("flush_l2"), py::arg("outputs").none(true),
        py::arg("rotate_inputs"), py::arg("tolerance").none(true), py::arg("launch_gate"),
        py::arg("unverifiable") = std::vector<std::string>(),
        py::arg("constants") = std::vector<std::string>(),
        "Times fn(*args) with CUPTI activity records; see src/native/benchmark_entry.h.\n"
        "Returns the sealed result dict. A Python exception raised by fn propagates unchanged.");
  m.def("benchmark_paired", &native::BenchmarkPaired, py::arg("candidate"), py::arg("reference"),
        py::arg("args"), py::kw_only(), py::arg("warmup").none(true), py::arg("repeat").none(true),
        py::arg("warmup_ms"), py::arg("repeat_ms"), py::arg("flush_l2"),
        py::arg("outputs").none(true), py::arg("rotate_inputs"), py::arg("tolerance").none(true),
        py::arg("launch_gate"), py::arg("unverifiable") = std::vector<std::string>(),
        py::arg("constants") = std::vector<std::string>(),
        "Times candidate and reference interleaved (ABBA) over the same arguments; the result\n"
        "has the candidate's keys, 'reference', and the paired ratio with its 95% interval.");
  m.def("prepare_timer", &native::PrepareTimerOrThrow,
        "Once per worker, before requests: CUPTI activity initialised, L2 flush buffer ready.");
  m.def("watch_begin", &native::WatchBegin,
        "Starts the cpu_only watch: the first CUDA runtime/driver API entry is recorded.");
  m.def("watch_end", &native::WatchEnd,
        "Stops the watch; None, or {cuda_call, location, stack, detected_ns} of the first entry.");
  m.def("device_check", &native::DeviceCheck,
        "Synchronize and read the last CUDA error: {error: None} or "
        "{error, message, sticky}.");
  m.def("copy_to_device", &native::CopyToDevice, py::arg("source"), py::arg("destination"),
        py::arg("stream"), py::arg("lanes") = 1,
        "Copies a host buffer to device memory at `destination` (an address) on `stream`,\n"
        "through pinned staging chunks, on up to `lanes` threads; the buffer has been read\n"
        "when it returns.");
  m.def("l2_cache_bytes", &native::L2CacheBytes, "L2 cache size of the current device, bytes.");
  m.def("cupti_version", &native::CuptiVersion, "CUPTI API version (cuptiGetVersion).");
  native::DefineIntegrityBindings(m);
}
