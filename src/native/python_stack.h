// DescribePythonStack: where the calling thread is in Python, for the cpu_only guard's report
// (spec/protocol.md §2.6 `location`, §4.4).
//
// Uses only the stable frame accessors (PyEval_GetFrame, PyFrame_GetBack, PyFrame_GetCode,
// PyFrame_GetLineNumber), which behave the same on Python 3.11 and 3.12. Safe to call from inside
// a C extension's CUDA call: it allocates no Python objects visible to user code and leaves any
// pending Python exception untouched.
#pragma once

#include <string>
#include <string_view>

namespace kc::native {

struct PythonStack {
  // "<file>:<line> in <func>" of the innermost frame whose file starts with
  // `preferred_prefix`, else of the innermost frame; "<native>" without a Python frame.
  std::string location;
  // Traceback-like ("  File "x", line 3, in f"), innermost frame last; empty without frames.
  std::string stack;
};

// Precondition: the calling thread holds the GIL.
PythonStack DescribePythonStack(std::string_view preferred_prefix);

}  // namespace kc::native
