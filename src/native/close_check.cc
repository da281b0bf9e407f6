#include "native/close_check.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

namespace kc::native {
namespace {

constexpr double kLargest = std::numeric_limits<double>::max();

template <typename T>
T Load(const std::byte* base, int64_t i) {
  T value;
  std::memcpy(&value, base + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

// IEEE-style binary format with `exponent_bits` and `mantissa_bits`, decoded exactly.
// `ieee_specials`: an all-ones exponent is inf/NaN (float16, e5m2); otherwise (e4m3fn) only
// the all-ones exponent and mantissa is NaN and there is no inf.
double DecodeSmallFloat(uint32_t bits, int exponent_bits, int mantissa_bits, bool ieee_specials) {
  uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
  uint32_t exponent = (bits >> mantissa_bits) & ((1u << exponent_bits) - 1);
  bool negative = (bits >> (exponent_bits + mantissa_bits)) & 1;
  int bias = (1 << (exponent_bits - 1)) - 1;
  uint32_t all_ones = (1u << exponent_bits) - 1;
  double value;
  if (ieee_specials && exponent == all_ones) {
    value = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                          : std::numeric_limits<double>::infinity();
  } else if (!ieee_specials && exponent == all_ones && mantissa == (1u << mantissa_bits) - 1) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - bias - mantissa_bits);
  } else {
    value = std::ldexp(static_cast<double>(mantissa | (1u << mantissa_bits)),
                       static_cast<int>(exponent) - bias - mantissa_bits);
  }
  return negative ? -value : value;
}

// Lookup tables: ldexp per element would dominate a large comparison.
template <size_t kEntries>
struct DecodeTable {
  std::array<float, kEntries> values;
  DecodeTable(int exponent_bits, int mantissa_bits, bool ieee_specials) {
    for (size_t i = 0; i < kEntries; ++i) {
      values[i] = static_cast<float>(
          DecodeSmallFloat(static_cast<uint32_t>(i), exponent_bits, mantissa_bits, ieee_specials));
    }
  }
};

const DecodeTable<65536>& HalfTable() {
  static const auto* table = new DecodeTable<65536>(5, 10, true);
  return *table;
}
const DecodeTable<256>& E4M3FnTable() {
  static const auto* table = new DecodeTable<256>(4, 3, false);
  return *table;
}
const DecodeTable<256>& E5M2Table() {
  static const auto* table = new DecodeTable<256>(5, 2, true);
  return *table;
}

void Mismatch(CloseResult& r, int64_t index) {
  ++r.mismatched;
  if (!r.first_mismatch) r.first_mismatch = index;
}

// The error maxima of one Add call, kept in locals: the inputs are std::byte, which may alias
// the result, so updating the result in the loop would force a reload per element.
struct Maxima {
  double abs_err;
  double rel_err;

  // |a - e| may be inf when the difference of two finite doubles overflows; Result() clamps.
  void Update(double diff, double abs_e) {
    abs_err = diff > abs_err ? diff : abs_err;
    // Compared by multiplication; the division runs only when the maximum grows.
    if (abs_e != 0 && diff > rel_err * abs_e) rel_err = diff / abs_e;
  }
};

// NaN matches NaN and an infinity matches itself; anything else with a non-finite side differs.
void CompareNonFinite(double a, double e, int64_t index, CloseResult& r) {
  r.nonfinite_actual += !std::isfinite(a);
  r.nonfinite_expected += !std::isfinite(e);
  bool same = (std::isnan(a) && std::isnan(e)) || a == e;
  if (!same) Mismatch(r, index);
}

template <typename Decode>
void AddFloats(const std::byte* a, const std::byte* e, int64_t count, int64_t base,
               const Tolerance& tol, Decode decode, CloseResult& r) {
  const double atol = tol.atol, rtol = tol.rtol;
  Maxima maxima{r.max_abs_err, r.max_rel_err};
  for (int64_t i = 0; i < count; ++i) {
    double x = decode(a, i), y = decode(e, i);
    if (!std::isfinite(x) || !std::isfinite(y)) [[unlikely]] {
      CompareNonFinite(x, y, base + i, r);
      continue;
    }
    double diff = std::fabs(x - y), abs_y = std::fabs(y);
    if (!(diff <= atol + rtol * abs_y)) [[unlikely]]
      Mismatch(r, base + i);
    maxima.Update(diff, abs_y);
  }
  r.max_abs_err = maxima.abs_err;
  r.max_rel_err = maxima.rel_err;
}

// bool elements are bytes, and any non-zero byte is true (a raw 2 is not a valid C++ bool).
struct BoolByte {};

template <typename T>
__int128 LoadInteger(const std::byte* base, int64_t i) {
  if constexpr (std::is_same_v<T, BoolByte>) {
    return Load<uint8_t>(base, i) != 0;
  } else {
    return Load<T>(base, i);
  }
}

template <typename T>
void AddIntegers(const std::byte* a, const std::byte* e, int64_t count, int64_t base,
                 const Tolerance& tol, CloseResult& r) {
  const double atol = tol.atol, rtol = tol.rtol;
  Maxima maxima{r.max_abs_err, r.max_rel_err};
  for (int64_t i = 0; i < count; ++i) {
    __int128 x = LoadInteger<T>(a, i), y = LoadInteger<T>(e, i);
    double diff = static_cast<double>(x > y ? x - y : y - x);  // exact, then rounded
    double abs_y = std::fabs(static_cast<double>(y));
    if (!(diff <= atol + rtol * abs_y)) [[unlikely]]
      Mismatch(r, base + i);
    maxima.Update(diff, abs_y);
  }
  r.max_abs_err = maxima.abs_err;
  r.max_rel_err = maxima.rel_err;
}

template <size_t kEntries, typename Bits>
auto TableDecoder(const DecodeTable<kEntries>& table) {
  return
      [&table](const std::byte* p, int64_t i) -> double { return table.values[Load<Bits>(p, i)]; };
}

// The row-major multi-index of a flat element index.
std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t extent = shape[d] > 0 ? shape[d] : 1;
    index[d] = flat % extent;
    flat /= extent;
  }
  return index;
}

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kUInt16:
      return "uint16";
    case DType::kUInt32:
      return "uint32";
    case DType::kUInt64:
      return "uint64";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat8E4M3Fn:
      return "float8_e4m3fn";
    case DType::kFloat8E5M2:
      return "float8_e5m2";
  }
  return "unknown";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kFloat8E4M3Fn:
    case DType::kFloat8E5M2:
      return 1;
    case DType::kUInt16:
    case DType::kInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kUInt32:
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kUInt64:
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 1;
}

Status ValidateTolerance(const Tolerance& tolerance) {
  if (!std::isfinite(tolerance.rtol) || tolerance.rtol < 0) {
    return InvalidArgumentError("rtol must be a finite number >= 0");
  }
  if (!std::isfinite(tolerance.atol) || tolerance.atol < 0) {
    return InvalidArgumentError("atol must be a finite number >= 0");
  }
  return Status::Ok();
}

CloseAccumulator::CloseAccumulator(DType dtype, Tolerance tolerance)
    : dtype_(dtype), tolerance_(tolerance) {
  result_.rtol = tolerance.rtol;
  result_.atol = tolerance.atol;
}

void CloseAccumulator::Add(const void* actual, const void* expected, int64_t count) {
  const auto* a = static_cast<const std::byte*>(actual);
  const auto* e = static_cast<const std::byte*>(expected);
  const int64_t base = result_.total;
  const Tolerance& tol = tolerance_;
  CloseResult& r = result_;
  switch (dtype_) {
    case DType::kBool:
      AddIntegers<BoolByte>(a, e, count, base, tol, r);
      break;
    case DType::kUInt8:
      AddIntegers<uint8_t>(a, e, count, base, tol, r);
      break;
    case DType::kUInt16:
      AddIntegers<uint16_t>(a, e, count, base, tol, r);
      break;
    case DType::kUInt32:
      AddIntegers<uint32_t>(a, e, count, base, tol, r);
      break;
    case DType::kUInt64:
      AddIntegers<uint64_t>(a, e, count, base, tol, r);
      break;
    case DType::kInt8:
      AddIntegers<int8_t>(a, e, count, base, tol, r);
      break;
    case DType::kInt16:
      AddIntegers<int16_t>(a, e, count, base, tol, r);
      break;
    case DType::kInt32:
      AddIntegers<int32_t>(a, e, count, base, tol, r);
      break;
    case DType::kInt64:
      AddIntegers<int64_t>(a, e, count, base, tol, r);
      break;
    case DType::kFloat16:
      AddFloats(a, e, count, base, tol, TableDecoder<65536, uint16_t>(HalfTable()), r);
      break;
    case DType::kBFloat16:
      AddFloats(
          a, e, count, base, tol,
          [](const std::byte* p, int64_t i) -> double {
            return std::bit_cast<float>(static_cast<uint32_t>(Load<uint16_t>(p, i)) << 16);
          },
          r);
      break;
    case DType::kFloat32:
      AddFloats(
          a, e, count, base, tol,
          [](const std::byte* p, int64_t i) -> double { return Load<float>(p, i); }, r);
      break;
    case DType::kFloat64:
      AddFloats(a, e, count, base, tol, Load<double>, r);
      break;
    case DType::kFloat8E4M3Fn:
      AddFloats(a, e, count, base, tol, TableDecoder<256, uint8_t>(E4M3FnTable()), r);
      break;
    case DType::kFloat8E5M2:
      AddFloats(a, e, count, base, tol, TableDecoder<256, uint8_t>(E5M2Table()), r);
      break;
  }
  result_.total += count;
}

CloseResult CloseAccumulator::Result() const {
  CloseResult result = result_;
  result.passed = result.mismatched == 0;
  result.max_abs_err = std::fmin(result.max_abs_err, kLargest);  // an overflowed |a - e|
  result.max_rel_err = std::fmin(result.max_rel_err, kLargest);
  return result;
}

std::string DescribeFailure(const CloseResult& result) {
  if (!result.layout_mismatch.empty()) return result.layout_mismatch;
  if (result.passed) return "";
  std::string text = "max_abs_err=" + Number(result.max_abs_err) +
                     ", max_rel_err=" + Number(result.max_rel_err) +
                     " exceed atol=" + Number(result.atol) + ", rtol=" + Number(result.rtol) +
                     ": " + std::to_string(result.mismatched) + " of " +
                     std::to_string(result.total) + " elements differ";
  if (result.first_mismatch) {
    text += " (first at [";
    std::vector<int64_t> index = Unravel(*result.first_mismatch, result.shape);
    for (size_t d = 0; d < index.size(); ++d) {
      text += (d ? ", " : "") + std::to_string(index[d]);
    }
    text += "])";
  }
  if (result.nonfinite_actual || result.nonfinite_expected) {
    text += "; non-finite values: " + std::to_string(result.nonfinite_actual) + " in actual, " +
            std::to_string(result.nonfinite_expected) + " in expected";
  }
  return text;
}

nlohmann::json ToJson(const CloseResult& result) {
  nlohmann::json first = nullptr;
  if (result.first_mismatch) first = Unravel(*result.first_mismatch, result.shape);
  std::string reason = DescribeFailure(result);
  return {{"passed", result.passed},
          {"max_abs_err", result.max_abs_err},
          {"max_rel_err", result.max_rel_err},
          {"mismatched", result.mismatched},
          {"total", result.total},
          {"nonfinite_actual", result.nonfinite_actual},
          {"nonfinite_expected", result.nonfinite_expected},
          {"rtol", result.rtol},
          {"atol", result.atol},
          {"first_mismatch", first},
          {"reason", reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(reason)}};
}

}  // namespace kc::native
