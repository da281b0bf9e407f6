#include "native/python_errors.h"

namespace kc::native {
namespace py = pybind11;
namespace {

// Strong references, kept for the interpreter's life.
PyObject* g_unavailable_error = nullptr;
PyObject* g_call_error = nullptr;
PyObject* g_output_check_error = nullptr;

PyObject* NewException(const char* name, const char* doc) {
  PyObject* type = PyErr_NewExceptionWithDoc(name, doc, PyExc_Exception, nullptr);
  if (type == nullptr) throw py::error_already_set();
  return type;
}

}  // namespace

void DefineExceptions(py::module_& m) {
  g_unavailable_error =
      NewException("kcoral._native.UnavailableError",
                   "CUPTI or the GPU is unusable here (maps to kind `unavailable`).");
  g_call_error = NewException("kcoral._native.CallError",
                              "A CUDA error during warm-up or timing (maps to kind `runtime`).");
  g_output_check_error = NewException(
      "kcoral._native.OutputCheckError",
      "A timed call's outputs differ from the first checked call's (maps to kind `correctness`).");
  // The module attributes hold their own references; the globals keep theirs forever.
  m.attr("UnavailableError") = py::reinterpret_borrow<py::object>(g_unavailable_error);
  m.attr("CallError") = py::reinterpret_borrow<py::object>(g_call_error);
  m.attr("OutputCheckError") = py::reinterpret_borrow<py::object>(g_output_check_error);
}

PyObject* UnavailableErrorType() {
  return g_unavailable_error;
}
PyObject* CallErrorType() {
  return g_call_error;
}
PyObject* OutputCheckErrorType() {
  return g_output_check_error;
}

void Raise(PyObject* type, const std::string& message) {
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
    case StatusCode::kPermissionDenied:
    case StatusCode::kInternal:
      Raise(g_call_error, status.message());
  }
  Raise(g_call_error, status.message());
}

}  // namespace kc::native
