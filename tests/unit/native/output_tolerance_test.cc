#include "native/output_tolerance.h"

#include <gtest/gtest.h>

namespace kc::native {
namespace {

constexpr ElementType kFloat32{2, 32};
constexpr ElementType kBfloat16{4, 16};
constexpr ElementType kInt64{0, 64};

TEST(OutputToleranceTest, CallsThatAgreeBitForBitKeepTheDefault) {
  ToleranceChoice choice = ChooseTolerance(kFloat32, {0, 0, 0.0, 30.0}, std::nullopt);
  EXPECT_EQ(choice.source, "default");
  EXPECT_FLOAT_EQ(choice.tolerance.rtol, 1e-3f);
  EXPECT_FLOAT_EQ(choice.tolerance.atol, 1e-5f);
  EXPECT_FALSE(choice.beyond_rounding);
}

// index_add_ on float32: atomic sums round differently from call to call.
TEST(OutputToleranceTest, AtomicRoundingWidensAtolToTheSpread) {
  ToleranceChoice choice = ChooseTolerance(kFloat32, {0, 0, 3e-5, 40.0}, std::nullopt);
  EXPECT_EQ(choice.source, "spread of two reference calls");
  EXPECT_FALSE(choice.beyond_rounding);
  EXPECT_NEAR(choice.tolerance.atol, 8 * 3e-5, 1e-9);  // more than 4 eps x 40 = 1.9e-5
  EXPECT_DOUBLE_EQ(choice.spread, 3e-5);
}

TEST(OutputToleranceTest, EpsilonTermCoversLargeMagnitudes) {
  ToleranceChoice choice = ChooseTolerance(kFloat32, {0, 0, 1e-4, 1e4}, std::nullopt);
  EXPECT_NEAR(choice.tolerance.atol, 4 * Epsilon(kFloat32) * 1e4, 1e-6);
}

// A call that wrote once and then skipped leaves poison (NaN) or stale values far beyond
// rounding: the tolerance is not widened, so the difference shows.
TEST(OutputToleranceTest, PoisonLeftBehindIsBeyondRounding) {
  ToleranceChoice nan = ChooseTolerance(kFloat32, {5, 0, 0.0, 2.0}, std::nullopt);
  EXPECT_TRUE(nan.beyond_rounding);
  EXPECT_EQ(nan.source, "default");
  ToleranceChoice stale = ChooseTolerance(kFloat32, {0, 0, 1.5, 2.0}, std::nullopt);
  EXPECT_TRUE(stale.beyond_rounding);
  EXPECT_FLOAT_EQ(stale.tolerance.atol, 1e-5f);
}

TEST(OutputToleranceTest, SixteenBitTypesAllowMoreRounding) {
  ToleranceChoice choice = ChooseTolerance(kBfloat16, {0, 0, 0.05, 1.0}, std::nullopt);
  EXPECT_FALSE(choice.beyond_rounding);
  EXPECT_NEAR(choice.tolerance.atol, 0.4, 1e-6);
}

TEST(OutputToleranceTest, IntegersMustAgreeExactly) {
  ToleranceChoice choice = ChooseTolerance(kInt64, {0, 3, 0.0, 0.0}, std::nullopt);
  EXPECT_TRUE(choice.beyond_rounding);
  EXPECT_EQ(choice.source, "default");
}

TEST(OutputToleranceTest, CfgToleranceWins) {
  ToleranceChoice choice = ChooseTolerance(kFloat32, {0, 0, 1.5, 2.0}, OutputTolerance{0.1f, 2.0f});
  EXPECT_EQ(choice.source, "cfg tolerance");
  EXPECT_FLOAT_EQ(choice.tolerance.atol, 2.0f);
  EXPECT_EQ(ToJson(choice)["source"], "cfg tolerance");
}

}  // namespace
}  // namespace kc::native

namespace kc::native {
namespace {

TEST(WiderSpreadTest, TakesTheWiderOfEachField) {
  const ReferenceSpread a{1, 0, 0.5, 10.0};
  const ReferenceSpread b{0, 2, 2.0, 4.0};
  const ReferenceSpread wider = WiderSpread(a, b);
  EXPECT_EQ(wider.nan_mismatches, 1u);
  EXPECT_EQ(wider.bit_mismatches, 2u);
  EXPECT_EQ(wider.max_abs_diff, 2.0);
  EXPECT_EQ(wider.max_abs_reference, 10.0);
}

}  // namespace
}  // namespace kc::native
