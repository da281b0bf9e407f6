// CloseAccumulator: the element-wise comparison behind builtins.check_close / assert_close
// (spec/benchmark.md §2.3, with §10 items 1, 2, 4 and 16 fixed), over host buffers.
//
// An element matches when |actual - expected| <= atol + rtol * |expected| (torch.isclose's
// rule), computed in double (integers: the difference exactly, then as double). Non-finite
// values match only their own kind: NaN matches NaN, +inf matches +inf; a NaN or inf in actual
// where expected is finite is a mismatch, and so is a finite actual where expected is not.
// Errors are taken over the elements where both sides are finite, so every number in the result
// is finite (§10.4: a NaN statistic breaks serialisation); the non-finite elements are counted
// instead. max_rel_err is over elements with expected != 0 (0.0 when there are none).
//
// The caller feeds chunks in row-major order (tensor_compare.h does, so a 1 GiB tensor needs
// only one chunk per side in host memory, §10.16). Not thread-safe; one accumulator per check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::native {

enum class DType {
  kBool,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kFloat8E4M3Fn,
  kFloat8E5M2,
};

// "float32", "bfloat16", "float8_e4m3fn": torch's names without the "torch." prefix.
const char* DTypeName(DType dtype);
size_t DTypeSize(DType dtype);

struct Tolerance {
  double rtol = 1e-2;  // builtins' defaults (spec/benchmark.md §2.3)
  double atol = 1e-3;
};

// kInvalidArgument unless both are finite and >= 0.
Status ValidateTolerance(const Tolerance& tolerance);

struct CloseResult {
  bool passed = true;
  double max_abs_err = 0;
  double max_rel_err = 0;
  int64_t mismatched = 0;
  int64_t total = 0;
  int64_t nonfinite_actual = 0;
  int64_t nonfinite_expected = 0;
  std::optional<int64_t> first_mismatch;  // row-major index of the first mismatched element
  double rtol = 0;
  double atol = 0;
  std::vector<int64_t> shape;  // of the compared tensors (expected's, on a layout mismatch)
  // "shape mismatch: ..." when nothing was compared (then every count is 0 and passed false).
  std::string layout_mismatch;
};

class CloseAccumulator {
 public:
  CloseAccumulator(DType dtype, Tolerance tolerance);

  // Compares `count` elements of two contiguous host buffers of the accumulator's dtype; the
  // elements continue the row-major order of the previous calls.
  void Add(const void* actual, const void* expected, int64_t count);

  CloseResult Result() const;

 private:
  DType dtype_;
  Tolerance tolerance_;
  CloseResult result_;
};

// Why the result did not pass, without the "outputs differ: " prefix assert_close adds:
// "max_abs_err=0.5, max_rel_err=0.25 exceed atol=0.001, rtol=0.01: 7 of 1024 elements differ
// (first at [0, 3]); non-finite values: 2 in actual, 0 in expected". "" when it passed.
std::string DescribeFailure(const CloseResult& result);

// {passed, max_abs_err, max_rel_err, mismatched, total, nonfinite_actual, nonfinite_expected,
//  rtol, atol, first_mismatch (index list or null), reason (DescribeFailure, null if passed)}
nlohmann::json ToJson(const CloseResult& result);

}  // namespace kc::native
