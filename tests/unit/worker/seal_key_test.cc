// The worker's seal key (worker/seal_key.h): random, its own, and read-only once made.
#include "worker/seal_key.h"

#include <sys/mman.h>

#include <string>

#include <gtest/gtest.h>

namespace kc::worker {
namespace {

TEST(SealKey, IsThirtyTwoRandomBytes) {
  auto key = SealKey::Generate();
  ASSERT_TRUE(key.ok()) << key.status().message();
  ASSERT_EQ((*key)->bytes().size(), SealKey::kBytes);
  EXPECT_NE(std::string((*key)->bytes()), std::string(SealKey::kBytes, '\0'));
}

TEST(SealKey, EveryKeyIsItsOwn) {
  auto first = SealKey::Generate();
  auto second = SealKey::Generate();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE((*first)->bytes(), (*second)->bytes());
  EXPECT_NE((*first)->bytes().data(), (*second)->bytes().data());  // a page each
}

TEST(SealKeyDeathTest, ThePageIsReadOnlyOnceMade) {
  auto key = SealKey::Generate();
  ASSERT_TRUE(key.ok());
  volatile char* byte = const_cast<char*>((*key)->bytes().data());
  EXPECT_DEATH(*byte = 1, "");
}

}  // namespace
}  // namespace kc::worker
