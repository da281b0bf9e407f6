#include "base/iteration_count.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kc {
namespace {

TEST(IterationCountTest, BudgetOverEstimate) {
  EXPECT_EQ(BudgetIterationCount(100, 0.3, 1, 1000), 333);
  EXPECT_EQ(BudgetIterationCount(0, 0.3, 1, 1000), 1);  // at least the minimum
  EXPECT_EQ(BudgetIterationCount(0, 0.3, 0, 1000), 0);
}

TEST(IterationCountTest, CappedAndUnmeasurable) {
  EXPECT_EQ(BudgetIterationCount(100, 1e-9, 1, 1000), 1000);
  EXPECT_EQ(BudgetIterationCount(100, 0, 1, 1000), 1000);
  EXPECT_EQ(BudgetIterationCount(100, std::nan(""), 1, 1000), 1000);
}

}  // namespace
}  // namespace kc
