#include "pool/fair_share.h"

#include <gtest/gtest.h>

namespace kc::pool {
namespace {

TEST(FairShare, ChargesGrowVirtualTimeByWeight) {
  FairShare share;
  share.Charge("a", 2, 4.0);
  share.Charge("b", 1, 4.0);
  EXPECT_DOUBLE_EQ(share.VirtualTime("a"), 2.0);
  EXPECT_DOUBLE_EQ(share.VirtualTime("b"), 4.0);
}

TEST(FairShare, ATenantBackFromIdleBanksNoCredit) {
  FairShare share;
  share.Arrive("busy");
  share.Grant("busy");
  share.Charge("busy", 1, 100.0);
  share.Arrive("busy");
  share.Grant("busy");  // the last grant is at 100
  share.Arrive("idle");
  EXPECT_DOUBLE_EQ(share.VirtualTime("idle"), 100.0);  // not 0: it was away, not owed
}

TEST(FairShare, AZeroWeightCountsAsTheSmallest) {
  FairShare share;
  share.Charge("a", 0, 1.0);
  EXPECT_DOUBLE_EQ(share.VirtualTime("a"), 1.0 / FairShare::kMinWeight);
}

}  // namespace
}  // namespace kc::pool
