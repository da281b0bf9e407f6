#include "base/status.h"

#include <string>

#include <gtest/gtest.h>

namespace kc {
namespace {

TEST(StatusOr, HandsOutItsValue) {
  StatusOr<std::string> text = std::string("ready");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "ready");
  EXPECT_EQ(text->size(), 5u);
  EXPECT_EQ(std::move(text).value(), "ready");
}

TEST(StatusOr, AnOkStatusIsNoValue) {
  StatusOr<int> made = Status::Ok();
  EXPECT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInternal);
}

TEST(StatusOrDeathTest, ReadingTheValueOfAnErrorAbortsNamingIt) {
  StatusOr<int> missing = NotFoundError("no such blob");
  EXPECT_DEATH(static_cast<void>(missing.value()), "value\\(\\) of an error: no such blob");
  EXPECT_DEATH(static_cast<void>(*missing), "no such blob");
  const StatusOr<std::string> empty = InternalError("nothing here");
  EXPECT_DEATH(static_cast<void>(empty->size()), "nothing here");
}

}  // namespace
}  // namespace kc
