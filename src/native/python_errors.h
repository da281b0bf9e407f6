// kc::Status -> Python exceptions for kcoral._native's bindings (STYLE.md §3):
//   kUnavailable      -> kcoral._native.UnavailableError (CUPTI failed, no activity, no GPU)
//   kInvalidArgument  -> ValueError
//   anything else     -> kcoral._native.CallError (a CUDA error during warm-up or timing; the
//                        message starts with the cudaError name)
//   a failed output check -> kcoral._native.OutputCheckError (raised by the benchmark binding)
#pragma once

#include <string>
#include <utility>

#include <pybind11/pybind11.h>

#include "base/status.h"

namespace kc::native {

// Creates the exception types and adds them to `m`; once, at module import.
void DefineExceptions(pybind11::module_& m);

PyObject* UnavailableErrorType();
PyObject* CallErrorType();
PyObject* OutputCheckErrorType();

[[noreturn]] void Raise(PyObject* type, const std::string& message);
void ThrowIfError(const Status& status);

template <typename T>
T ValueOrThrow(StatusOr<T> value) {
  ThrowIfError(value.status());
  return std::move(value).value();
}

}  // namespace kc::native
