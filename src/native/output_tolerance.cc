#include "native/output_tolerance.h"

#include <algorithm>
#include <cmath>

namespace kc::native {
namespace {

constexpr uint8_t kFloatCode = 2;   // kDLFloat
constexpr uint8_t kBfloatCode = 4;  // kDLBfloat
constexpr double kSpreadFactor = 8;
constexpr double kEpsilonFactor = 4;

// Rounding cannot move an output by more than this fraction of its largest magnitude.
double RoundingCap(ElementType type) {
  return type.bits == 16 ? 1.0 / 16 : 1e-2;
}

}  // namespace

double Epsilon(ElementType type) {
  if (type.code == kBfloatCode && type.bits == 16) return std::ldexp(1.0, -7);
  if (type.code != kFloatCode) return 0;
  switch (type.bits) {
    case 16:
      return std::ldexp(1.0, -10);
    case 32:
      return std::ldexp(1.0, -23);
    case 64:
      return std::ldexp(1.0, -52);
    default:
      return 0;
  }
}

ToleranceChoice ChooseTolerance(ElementType type, const ReferenceSpread& spread,
                                const std::optional<OutputTolerance>& declared) {
  ToleranceChoice choice;
  choice.spread = spread.max_abs_diff;
  const bool floating = Epsilon(type) > 0;
  choice.beyond_rounding =
      spread.nan_mismatches > 0 || spread.bit_mismatches > 0 ||
      (floating && !(spread.max_abs_diff <= RoundingCap(type) * spread.max_abs_reference));
  if (declared) {
    choice.tolerance = *declared;
    choice.source = "cfg tolerance";
    return choice;
  }
  if (!floating || spread.max_abs_diff == 0 || choice.beyond_rounding) {
    choice.source = "default";
    return choice;
  }
  choice.tolerance.atol = static_cast<float>(
      std::max({static_cast<double>(choice.tolerance.atol), kSpreadFactor * spread.max_abs_diff,
                kEpsilonFactor * Epsilon(type) * spread.max_abs_reference}));
  choice.source = "spread of two reference calls";
  return choice;
}

nlohmann::json ToJson(const ToleranceChoice& choice) {
  return {{"rtol", choice.tolerance.rtol},
          {"atol", choice.tolerance.atol},
          {"source", choice.source},
          {"reference_spread", choice.spread}};
}

ReferenceSpread WiderSpread(const ReferenceSpread& a, const ReferenceSpread& b) {
  return {std::max(a.nan_mismatches, b.nan_mismatches),
          std::max(a.bit_mismatches, b.bit_mismatches), std::max(a.max_abs_diff, b.max_abs_diff),
          std::max(a.max_abs_reference, b.max_abs_reference)};
}

}  // namespace kc::native
