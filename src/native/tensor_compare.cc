#include "native/tensor_compare.h"

#include <algorithm>
#include <vector>

namespace kc::native {

std::string LayoutMismatch(const TensorView& actual, const TensorView& expected) {
  if (actual.shape != expected.shape) {
    return "shape mismatch: actual " + ShapeText(actual.shape) + " vs expected " +
           ShapeText(expected.shape);
  }
  if (actual.dtype != expected.dtype) {
    return std::string("dtype mismatch: actual ") + DTypeName(actual.dtype) + " vs expected " +
           DTypeName(expected.dtype);
  }
  return "";
}

StatusOr<CloseResult> CompareTensors(ElementSource& actual, ElementSource& expected,
                                     Tolerance tolerance, int64_t chunk_bytes) {
  KC_RETURN_IF_ERROR(ValidateTolerance(tolerance));
  const TensorView& a = actual.view();
  const TensorView& e = expected.view();
  if (std::string mismatch = LayoutMismatch(a, e); !mismatch.empty()) {
    CloseResult result;
    result.passed = false;
    result.rtol = tolerance.rtol;
    result.atol = tolerance.atol;
    result.shape = e.shape;
    result.layout_mismatch = std::move(mismatch);
    return result;
  }

  const int64_t total = a.ElementCount();
  const int64_t size = static_cast<int64_t>(DTypeSize(a.dtype));
  const int64_t chunk = std::max<int64_t>(1, std::min(total, chunk_bytes / size));
  std::vector<std::byte> actual_staging(actual.NeedsStaging() ? chunk * size : 0);
  std::vector<std::byte> expected_staging(expected.NeedsStaging() ? chunk * size : 0);
  CloseAccumulator accumulator(a.dtype, tolerance);
  for (int64_t first = 0; first < total; first += chunk) {
    int64_t count = std::min(chunk, total - first);
    KC_ASSIGN_OR_RETURN(const std::byte* actual_chunk,
                        actual.Read(first, count, actual_staging.data()));
    KC_ASSIGN_OR_RETURN(const std::byte* expected_chunk,
                        expected.Read(first, count, expected_staging.data()));
    accumulator.Add(actual_chunk, expected_chunk, count);
  }
  CloseResult result = accumulator.Result();
  result.shape = a.shape;
  return result;
}

}  // namespace kc::native
