// CompareTensors: builtins.check_close over two tensors wherever they live (spec/benchmark.md
// §2.3 and §10): strict shape and dtype equality first (no broadcasting, §10.1), then the
// element-wise CloseAccumulator over chunks of at most `chunk_bytes` per side (§10.16).
//
//   HostElementSource actual(actual_view), expected(expected_view);
//   KC_ASSIGN_OR_RETURN(CloseResult result, CompareTensors(actual, expected, tolerance));
//
// Device memory must be quiescent (the caller synchronizes) and both sources must outlive the
// call. Thread-compatible: no shared state.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "native/close_check.h"
#include "native/element_source.h"

namespace kc::native {

inline constexpr int64_t kCompareChunkBytes = int64_t{16} << 20;

// "shape mismatch: actual [4] vs expected [2, 2]", "dtype mismatch: actual float32 vs expected
// float64", or "" when both agree.
std::string LayoutMismatch(const TensorView& actual, const TensorView& expected);

// A layout mismatch is a result that did not pass (layout_mismatch set, nothing compared);
// kInvalidArgument for a bad tolerance; a source's read error is returned as it is.
StatusOr<CloseResult> CompareTensors(ElementSource& actual, ElementSource& expected,
                                     Tolerance tolerance, int64_t chunk_bytes = kCompareChunkBytes);

}  // namespace kc::native
