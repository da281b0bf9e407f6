#include "base/utc_time.h"

#include <regex>

#include <gtest/gtest.h>

namespace kc {
namespace {

TEST(UtcTime, TheFractionHasTheDigitsAsked) {
  EXPECT_TRUE(std::regex_match(FormatUtcNow("%Y-%m-%dT%H:%M:%S", 3),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_TRUE(
      std::regex_match(FormatUtcNow("%H:%M:%S", 6), std::regex(R"(\d\d:\d\d:\d\d\.\d{6}Z)")));
  EXPECT_TRUE(std::regex_match(FormatUtcNow("%Y", 0), std::regex(R"(\d{4}Z)")));
}

}  // namespace
}  // namespace kc
