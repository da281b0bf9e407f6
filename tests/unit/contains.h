// Contains: EXPECT_TRUE(Contains(message, "part")) fails showing both texts,
// as gmock's HasSubstr would, with GoogleTest alone. Test-only.
#pragma once

#include <string_view>

#include <gtest/gtest.h>

namespace kc::testing {

inline ::testing::AssertionResult Contains(std::string_view text, std::string_view part) {
  if (text.find(part) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

}  // namespace kc::testing
