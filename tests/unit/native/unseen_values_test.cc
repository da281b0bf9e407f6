#include "native/unseen_values.h"

#include <gtest/gtest.h>

namespace kc::native {
namespace {

UnseenValuesTiming Timing(std::vector<double> seen, std::vector<double> unseen) {
  UnseenValuesTiming timing;
  timing.seen_ms = std::move(seen);
  timing.unseen_ms = std::move(unseen);
  return timing;
}

TEST(UnseenValues, HonestWorkTakesTheSameTimeOnBothAndIsNotFlagged) {
  SpanFindings found;
  const auto report =
      JudgeUnseenValues(Timing({0.181, 0.179, 0.180, 0.182}, {0.180, 0.183, 0.179, 0.181}), found);
  EXPECT_TRUE(found.flags.empty());
  EXPECT_EQ(report["pairs"], 4);
  EXPECT_NEAR(report["seen_median_ms"].get<double>(), 0.1805, 1e-9);
}

TEST(UnseenValues, ACacheByTheValuesContentsIsFlaggedWithBothMedians) {
  // The S1 fingerprint program on the H100: a copy of the cached product against a matmul.
  SpanFindings found;
  JudgeUnseenValues(Timing({0.072, 0.071, 0.073}, {0.179, 0.181, 0.180}), found);
  ASSERT_EQ(found.flags.size(), 1u);
  EXPECT_NE(found.flags[0].find("72.0 us"), std::string::npos) << found.flags[0];
  EXPECT_NE(found.flags[0].find("180.0 us"), std::string::npos) << found.flags[0];
  EXPECT_NE(found.flags[0].find("2.5x"), std::string::npos) << found.flags[0];
}

TEST(UnseenValues, AGapWithinHostNoiseIsNotFlagged) {
  // A launch-bound call: 5 us against 7 us is a ratio under 0.8 but within noise.
  SpanFindings found;
  JudgeUnseenValues(Timing({0.005, 0.005, 0.005}, {0.007, 0.007, 0.007}), found);
  EXPECT_TRUE(found.flags.empty());
}

TEST(UnseenValues, NewValuesAnsweredWithTheCallersAnswerAreFlaggedThoughAsFast) {
  // A cache that answers new values with the product it holds: as fast on both kinds.
  SpanFindings found;
  auto timing = Timing({0.072, 0.071, 0.073}, {0.072, 0.072, 0.071});
  timing.answered_as_caller = 3;
  const auto report = JudgeUnseenValues(timing, found);
  ASSERT_EQ(found.flags.size(), 1u);
  EXPECT_NE(found.flags[0].find("3 of 3 calls returned its answer to the caller's values"),
            std::string::npos)
      << found.flags[0];
  EXPECT_EQ(report["answered_as_caller"], 3);
}

TEST(UnseenValues, ARaisingCallIsFlagged) {
  SpanFindings found;
  auto timing = Timing({0.1}, {});
  timing.raised = true;
  const auto report = JudgeUnseenValues(timing, found);
  EXPECT_EQ(found.flags.size(), 1u);
  EXPECT_TRUE(report["raised"].get<bool>());
}

TEST(UnseenValues, PairsFollowTheRepeatBudgetWithinThreeAndSixteen) {
  EXPECT_EQ(UnseenPairs(0.180, 100), 16);  // 69 would fit
  EXPECT_EQ(UnseenPairs(2.0, 100), 6);     // 25 ms for 12 calls of 2 ms
  EXPECT_EQ(UnseenPairs(50.0, 100), 3);    // a slow call still gets three pairs
  EXPECT_EQ(UnseenPairs(0.0, 100), 16);    // no GPU work: the host time decides
}

TEST(UnseenValues, ScalesAreDistinctFromTheFreshVariantAndAtMostOne) {
  for (int k = 0; k < 16; ++k) {
    EXPECT_GT(UnseenScale(k), 0.75f);
    EXPECT_LE(UnseenScale(k), 1.0f);
    if (k > 0) {
      EXPECT_GT(UnseenScale(k), UnseenScale(k - 1));
    }
  }
}

}  // namespace
}  // namespace kc::native
