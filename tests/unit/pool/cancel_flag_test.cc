#include "pool/cancel_flag.h"

#include <poll.h>

#include <gtest/gtest.h>

namespace kc::pool {
namespace {

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

TEST(CancelFlag, StartsLoweredAndQuiet) {
  CancelFlag flag;
  EXPECT_FALSE(flag.raised());
  ASSERT_GE(flag.fd(), 0);
  EXPECT_FALSE(Readable(flag.fd()));
}

TEST(CancelFlag, RaisingWakesAPoller) {
  CancelFlag flag;
  flag.Raise();
  EXPECT_TRUE(flag.raised());
  EXPECT_TRUE(Readable(flag.fd()));
}

TEST(CancelFlag, RaisingTwiceIsHarmless) {
  CancelFlag flag;
  flag.Raise();
  flag.Raise();
  EXPECT_TRUE(flag.raised());
  EXPECT_TRUE(Readable(flag.fd()));
}

}  // namespace
}  // namespace kc::pool
