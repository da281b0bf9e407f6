#include "native/close_check.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace kc::native {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
CloseResult Compare(DType dtype, const std::vector<T>& actual, const std::vector<T>& expected,
                    Tolerance tolerance = {0, 0}) {
  CloseAccumulator accumulator(dtype, tolerance);
  accumulator.Add(actual.data(), expected.data(), static_cast<int64_t>(actual.size()));
  return accumulator.Result();
}

TEST(CloseAccumulator, ToleranceBoundIsInclusive) {
  // atol + rtol * |e| = 0.5 + 0.25 * 4 = 1.5: 5.5 is exactly on the bound, 5.50390625 past it.
  Tolerance tolerance{0.25, 0.5};
  CloseResult on_bound = Compare<double>(DType::kFloat64, {5.5}, {4}, tolerance);
  EXPECT_TRUE(on_bound.passed);
  EXPECT_DOUBLE_EQ(on_bound.max_abs_err, 1.5);
  EXPECT_DOUBLE_EQ(on_bound.max_rel_err, 0.375);
  CloseResult past = Compare<double>(DType::kFloat64, {5.50390625}, {4}, tolerance);
  EXPECT_FALSE(past.passed);
  EXPECT_EQ(past.mismatched, 1);
  EXPECT_EQ(past.rtol, 0.25);
  EXPECT_EQ(past.atol, 0.5);
}

TEST(CloseAccumulator, RelativeErrorSkipsZeroExpected) {
  // |1-0| = 1 and |5-4| = 1; relative error only where e != 0: 1/4.
  CloseResult result = Compare<float>(DType::kFloat32, {1, 5}, {0, 4}, {1, 1});
  EXPECT_TRUE(result.passed);
  EXPECT_DOUBLE_EQ(result.max_abs_err, 1);
  EXPECT_DOUBLE_EQ(result.max_rel_err, 0.25);
  EXPECT_EQ(Compare<float>(DType::kFloat32, {3}, {0}, {0, 5}).max_rel_err, 0);
}

TEST(CloseAccumulator, NonFiniteValuesMatchOnlyTheirOwnKind) {
  std::vector<double> actual = {kNan, kNan, 1, kInf, kInf, kInf, 2};
  std::vector<double> expected = {kNan, 1, kNan, kInf, -kInf, 1e30, 2.5};
  CloseResult result = Compare(DType::kFloat64, actual, expected, {0, 1});
  // Mismatches: NaN vs 1, 1 vs NaN, inf vs -inf, inf vs 1e30. Matches: NaN-NaN, inf-inf, 2-2.5.
  EXPECT_EQ(result.mismatched, 4);
  EXPECT_EQ(result.first_mismatch, std::optional<int64_t>(1));
  EXPECT_EQ(result.nonfinite_actual, 5);
  EXPECT_EQ(result.nonfinite_expected, 4);
  EXPECT_EQ(result.total, 7);
  // Errors only over the elements finite on both sides: just |2 - 2.5|.
  EXPECT_DOUBLE_EQ(result.max_abs_err, 0.5);
  EXPECT_DOUBLE_EQ(result.max_rel_err, 0.2);
}

TEST(CloseAccumulator, OverflowingErrorsAreClampedToFinite) {
  constexpr double kMax = std::numeric_limits<double>::max();
  CloseResult result = Compare<double>(DType::kFloat64, {kMax, 1}, {-kMax, 4.9e-324}, {1, 1});
  EXPECT_EQ(result.mismatched, 1);  // kMax vs -kMax; 1 vs the smallest denormal passes (rtol 1)
  EXPECT_EQ(result.max_abs_err, kMax);
  EXPECT_EQ(result.max_rel_err, kMax);  // 1 / 4.9e-324 overflows
  EXPECT_TRUE(std::isfinite(result.max_abs_err));
}

TEST(CloseAccumulator, Int64DifferencesAreExact) {
  // As doubles, 2^53 + 1 and 2^53 are the same number.
  int64_t big = int64_t{1} << 53;
  CloseResult result = Compare<int64_t>(DType::kInt64, {big + 1, 7}, {big, 7});
  EXPECT_FALSE(result.passed);
  EXPECT_EQ(result.mismatched, 1);
  EXPECT_DOUBLE_EQ(result.max_abs_err, 1);
  CloseResult extremes = Compare<int64_t>(DType::kInt64, {std::numeric_limits<int64_t>::min()},
                                          {std::numeric_limits<int64_t>::max()});
  EXPECT_DOUBLE_EQ(extremes.max_abs_err, 18446744073709551615.0);  // 2^64 - 1, no wrap-around
}

TEST(CloseAccumulator, SmallIntegersAndBools) {
  EXPECT_DOUBLE_EQ(Compare<int8_t>(DType::kInt8, {-128}, {127}).max_abs_err, 255);
  EXPECT_DOUBLE_EQ(Compare<uint8_t>(DType::kUInt8, {0}, {255}).max_abs_err, 255);
  EXPECT_DOUBLE_EQ(Compare<int16_t>(DType::kInt16, {-32768}, {32767}).max_abs_err, 65535);
  EXPECT_DOUBLE_EQ(Compare<uint16_t>(DType::kUInt16, {65535}, {0}).max_abs_err, 65535);
  EXPECT_DOUBLE_EQ(Compare<int32_t>(DType::kInt32, {-5}, {5}).max_abs_err, 10);
  EXPECT_DOUBLE_EQ(Compare<uint64_t>(DType::kUInt64, {~uint64_t{0}}, {0}).max_abs_err,
                   18446744073709551615.0);
  // Any non-zero byte is true.
  CloseResult bools = Compare<uint8_t>(DType::kBool, {2, 0, 1}, {1, 1, 1});
  EXPECT_EQ(bools.mismatched, 1);
  EXPECT_EQ(bools.first_mismatch, std::optional<int64_t>(1));
  // atol 1 lets integers differ by one.
  EXPECT_TRUE(Compare<int32_t>(DType::kInt32, {10}, {11}, {0, 1}).passed);
}

TEST(CloseAccumulator, Float16DecodesExactly) {
  // 0x3C00 = 1, 0x4000 = 2, 0x7BFF = 65504 (largest), 0x0001 = 2^-24 (smallest subnormal).
  CloseResult one_two = Compare<uint16_t>(DType::kFloat16, {0x3C00}, {0x4000});
  EXPECT_DOUBLE_EQ(one_two.max_abs_err, 1);
  EXPECT_DOUBLE_EQ(one_two.max_rel_err, 0.5);
  EXPECT_DOUBLE_EQ(Compare<uint16_t>(DType::kFloat16, {0x7BFF}, {0}).max_abs_err, 65504);
  EXPECT_DOUBLE_EQ(Compare<uint16_t>(DType::kFloat16, {0x0001}, {0}).max_abs_err,
                   std::ldexp(1.0, -24));
  EXPECT_DOUBLE_EQ(Compare<uint16_t>(DType::kFloat16, {0xC000}, {0x3C00}).max_abs_err, 3);
  // 0x7C00 = +inf, 0x7E00 = NaN.
  CloseResult specials = Compare<uint16_t>(DType::kFloat16, {0x7C00, 0x7E00}, {0x7C00, 0x3C00});
  EXPECT_EQ(specials.mismatched, 1);
  EXPECT_EQ(specials.nonfinite_actual, 2);
  EXPECT_EQ(specials.nonfinite_expected, 1);
}

TEST(CloseAccumulator, BFloat16DecodesExactly) {
  // 0x3F80 = 1; 0x4049 = 3.140625.
  EXPECT_DOUBLE_EQ(Compare<uint16_t>(DType::kBFloat16, {0x4049}, {0x3F80}).max_abs_err, 2.140625);
  EXPECT_EQ(Compare<uint16_t>(DType::kBFloat16, {0x7FC0}, {0x3F80}).nonfinite_actual, 1);
}

TEST(CloseAccumulator, Float8DecodesExactly) {
  // e4m3fn: 0x38 = 1, 0x7E = 448 (largest), 0x01 = 2^-9, 0x7F = NaN, and no infinity.
  EXPECT_DOUBLE_EQ(Compare<uint8_t>(DType::kFloat8E4M3Fn, {0x7E}, {0x38}).max_abs_err, 447);
  EXPECT_DOUBLE_EQ(Compare<uint8_t>(DType::kFloat8E4M3Fn, {0x01}, {0}).max_abs_err,
                   std::ldexp(1.0, -9));
  EXPECT_EQ(Compare<uint8_t>(DType::kFloat8E4M3Fn, {0x7F, 0x78}, {0, 0}).nonfinite_actual, 1);
  // e5m2: 0x3C = 1, 0x7B = 57344 (largest), 0x7C = inf, 0x7D = NaN.
  EXPECT_DOUBLE_EQ(Compare<uint8_t>(DType::kFloat8E5M2, {0x7B}, {0x3C}).max_abs_err, 57343);
  CloseResult specials = Compare<uint8_t>(DType::kFloat8E5M2, {0x7C, 0x7D}, {0x7C, 0x7D});
  EXPECT_TRUE(specials.passed);
  EXPECT_EQ(specials.nonfinite_actual, 2);
}

TEST(CloseAccumulator, ChunksContinueTheIndex) {
  std::vector<float> actual = {1, 2, 3, 4, 9, 6};
  std::vector<float> expected = {1, 2, 3, 4, 5, 6};
  CloseAccumulator accumulator(DType::kFloat32, {0, 0});
  accumulator.Add(actual.data(), expected.data(), 3);
  accumulator.Add(actual.data() + 3, expected.data() + 3, 3);
  CloseResult result = accumulator.Result();
  EXPECT_EQ(result.total, 6);
  EXPECT_EQ(result.mismatched, 1);
  EXPECT_EQ(result.first_mismatch, std::optional<int64_t>(4));
}

TEST(CloseAccumulator, EmptyInputPasses) {
  CloseResult result = CloseAccumulator(DType::kFloat32, {}).Result();
  EXPECT_TRUE(result.passed);
  EXPECT_EQ(result.total, 0);
  EXPECT_EQ(result.rtol, 1e-2);  // the builtins' defaults
  EXPECT_EQ(result.atol, 1e-3);
}

TEST(ValidateTolerance, RejectsNegativeAndNonFinite) {
  EXPECT_TRUE(ValidateTolerance({0, 0}).ok());
  for (Tolerance bad :
       {Tolerance{-1, 0}, Tolerance{0, -1e-9}, Tolerance{kNan, 0}, Tolerance{0, kInf}}) {
    EXPECT_EQ(ValidateTolerance(bad).code(), StatusCode::kInvalidArgument);
  }
}

TEST(DescribeFailure, NamesErrorsCountsFirstIndexAndNonFinite) {
  CloseResult result;
  result.passed = false;
  result.max_abs_err = 0.5;
  result.max_rel_err = 0.25;
  result.atol = 0.001;
  result.rtol = 0.01;
  result.mismatched = 7;
  result.total = 1024;
  result.first_mismatch = 3;
  result.shape = {32, 32};
  EXPECT_EQ(DescribeFailure(result),
            "max_abs_err=0.5, max_rel_err=0.25 exceed atol=0.001, rtol=0.01: 7 of 1024 elements "
            "differ (first at [0, 3])");
  result.first_mismatch = 35;
  result.nonfinite_actual = 2;
  EXPECT_EQ(DescribeFailure(result),
            "max_abs_err=0.5, max_rel_err=0.25 exceed atol=0.001, rtol=0.01: 7 of 1024 elements "
            "differ (first at [1, 3]); non-finite values: 2 in actual, 0 in expected");
  result.passed = true;
  EXPECT_EQ(DescribeFailure(result), "");
}

TEST(CloseResultJson, HasTheBuiltinKeysAndOnlyFiniteNumbers) {
  CloseResult result = Compare<double>(DType::kFloat64, {kNan, 2}, {1, 2});
  result.shape = {2};
  nlohmann::json json = ToJson(result);
  EXPECT_EQ(json.size(), 11u);
  EXPECT_EQ(json["passed"], false);
  EXPECT_EQ(json["mismatched"], 1);
  EXPECT_EQ(json["total"], 2);
  EXPECT_EQ(json["nonfinite_actual"], 1);
  EXPECT_EQ(json["nonfinite_expected"], 0);
  EXPECT_EQ(json["first_mismatch"], nlohmann::json::array({0}));
  EXPECT_EQ(json["max_abs_err"], 0.0);
  EXPECT_TRUE(json["reason"].is_string());
  EXPECT_TRUE(nlohmann::json::accept(json.dump()));

  CloseResult passed = Compare<double>(DType::kFloat64, {1}, {1});
  EXPECT_TRUE(ToJson(passed)["reason"].is_null());
  EXPECT_TRUE(ToJson(passed)["first_mismatch"].is_null());
}

TEST(DType, NamesAndSizes) {
  EXPECT_STREQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(DTypeName(DType::kFloat8E4M3Fn), "float8_e4m3fn");
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kUInt32), 4u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
}

}  // namespace
}  // namespace kc::native
