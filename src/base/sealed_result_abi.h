// The one C++-to-C++ hand-off of a benchmark result: kcoral._native (GPU timer) passes its
// finished result to kcoral._core, which adds the Python-level facts, seals the record with the
// worker's key and builds the dict user code gets back. The samples and statistics never pass
// through Python on the way (docs/benchmark-integrity.md).
//
// kcoral._core exports a PyCapsule named kSealResultCapsule whose pointer is a SealResultFn.
#pragma once

#include <Python.h>

#include <cstddef>

namespace kc {

inline constexpr const char* kSealResultCapsule = "kcoral._core.seal_result";

// `result_json`: one JSON object: the latency fields (base/latency_summary.h), the counts and
// flags of spec/benchmark.md §1.5, "timer", and "integrity": {"defences": {...}, "flags": [...],
// "conditions": [...], ...facts} (conditions: native/span_findings.h; may be left out). Returns a
// new reference to the result dict (with integrity.record and integrity.seal added), or nullptr
// with a Python exception set. Needs the GIL.
using SealResultFn = PyObject* (*)(const char* result_json, size_t length);

}  // namespace kc
