// The bindings of kcoral._native for the benchmark's integrity checks that programs and tests
// call directly: GPU telemetry (gpu_telemetry.h, clock_events.h), the helper-process scan
// (process_scan.h) and check_close (tensor_check.h). Bindings only.
#pragma once

#include <pybind11/pybind11.h>

namespace kc::native {

void DefineIntegrityBindings(pybind11::module_& m);

}  // namespace kc::native
