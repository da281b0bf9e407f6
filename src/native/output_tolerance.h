// How close a timed call's output must be to the reference call's (docs/benchmark-integrity.md
// "Nondeterministic reductions"). Pure: no CUDA.
//
// Atomic float sums, split-K and scatter-add round differently from call to call, so a check
// bit for bit (or within a fixed 1e-3) refuses honest kernels. The benchmark calls each function
// twice before timing it (the reference call and the first checked call) and measures how far
// the two outputs lie apart; ChooseTolerance turns that spread into the tolerance of every later
// check. A skipped computation is still caught whatever the tolerance: it leaves poison (NaN,
// which matches nothing but NaN) or values far beyond rounding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kc::native {

// The element type, from DLPack's code and bits (dlpack.h DLDataTypeCode).
struct ElementType {
  uint8_t code = 0;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, ...
  uint8_t bits = 8;
};

// |actual - expected| <= atol + rtol * |expected|, NaN matching NaN (floating types only; every
// other type compares bit for bit).
struct OutputTolerance {
  float rtol = 1e-3f;
  float atol = 1e-5f;
};

// Two calls' outputs compared (output_check.h EnqueueSpread, read back).
struct ReferenceSpread {
  uint64_t nan_mismatches = 0;   // floats: NaN in one call's output and not in the other's
  uint64_t bit_mismatches = 0;   // other types: differing elements
  double max_abs_diff = 0;       // floats: over elements finite in both
  double max_abs_reference = 0;  // floats: largest finite |reference|
};

struct ToleranceChoice {
  OutputTolerance tolerance;
  std::string source;            // "default", "cfg tolerance", "spread of two reference calls"
  bool beyond_rounding = false;  // the two calls disagree by more than rounding can explain
  double spread = 0;             // max_abs_diff, reported
};

// What a check failure says after its numbers: honest causes first, with the cfg key for each.
inline constexpr char kMismatchCauses[] =
    "beyond the tolerance (see defences.output_check). Honest code does this when its results "
    "vary from call to call by more than rounding (set cfg 'tolerance') or when the function "
    "keeps state from one call to the next; otherwise the call skipped its work, wrote its "
    "outputs only once, or returned a cached tensor";

// The wider of two spreads, field by field: what several calls showed, taken together.
ReferenceSpread WiderSpread(const ReferenceSpread& a, const ReferenceSpread& b);

// The machine epsilon of a floating type; 0 for other types.
double Epsilon(ElementType type);

// `declared` (cfg tolerance) wins. Otherwise: two calls that agree bit for bit keep the
// default; floats that differ within rounding (max |diff| <= 1e-2 of max |reference|, 1/16 for
// 16-bit types) get atol = max(default atol, 8 x max |diff|, 4 x eps x max |reference|); any
// other disagreement is beyond rounding, and the default tolerance is kept so that it shows.
ToleranceChoice ChooseTolerance(ElementType type, const ReferenceSpread& spread,
                                const std::optional<OutputTolerance>& declared);

// {"rtol", "atol", "source", "reference_spread"}.
nlohmann::json ToJson(const ToleranceChoice& choice);

}  // namespace kc::native
