#include "server/core/request_id.h"

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace kc::server {
namespace {

constexpr std::string_view kCanonical = "123e4567-e89b-42d3-a456-426614174000";

TEST(RequestId, CanonicalLowercaseUuidIsEchoed) {
  EXPECT_TRUE(IsCanonicalUuid(kCanonical));
  EXPECT_EQ(ChooseRequestId({kCanonical}), kCanonical);
}

TEST(RequestId, NonVersion4CanonicalUuidIsEchoed) {
  // Only the shape is checked, not the version.
  constexpr std::string_view kVersion1 = "00000000-0000-1000-8000-000000000000";
  EXPECT_EQ(ChooseRequestId({kVersion1}), kVersion1);
}

void ExpectReplaced(std::string_view supplied) {
  EXPECT_FALSE(IsCanonicalUuid(supplied)) << supplied;
  const std::string chosen = ChooseRequestId({supplied});
  EXPECT_NE(chosen, supplied);
  EXPECT_TRUE(IsCanonicalUuid(chosen)) << chosen;
}

TEST(RequestId, UppercaseUuidIsReplaced) {
  ExpectReplaced("123E4567-E89B-42D3-A456-426614174000");
}

TEST(RequestId, BracedUuidIsReplaced) {
  ExpectReplaced("{123e4567-e89b-42d3-a456-426614174000}");
}

TEST(RequestId, ThirtyFiveCharactersAreReplaced) {
  ExpectReplaced("123e4567-e89b-42d3-a456-42661417400");
}

TEST(RequestId, ThirtySevenCharactersAreReplaced) {
  ExpectReplaced("123e4567-e89b-42d3-a456-4266141740000");
}

TEST(RequestId, UnhyphenatedUuidIsReplaced) {
  ExpectReplaced("123e4567e89b42d3a456426614174000");
}

TEST(RequestId, MisplacedHyphenIsReplaced) {
  ExpectReplaced("123e456-7e89b-42d3-a456-426614174000");
}

TEST(RequestId, NonHexCharacterIsReplaced) {
  ExpectReplaced("123e4567-e89b-42d3-a456-42661417400g");
}

TEST(RequestId, EmptyValueIsReplaced) {
  ExpectReplaced("");
}

TEST(RequestId, TwoSuppliedValuesGiveANewId) {
  constexpr std::string_view kOther = "223e4567-e89b-42d3-a456-426614174000";
  const std::string chosen = ChooseRequestId({kCanonical, kOther});
  EXPECT_NE(chosen, kCanonical);
  EXPECT_NE(chosen, kOther);
  EXPECT_TRUE(IsCanonicalUuid(chosen));
  // Even the same value twice.
  EXPECT_NE(ChooseRequestId({kCanonical, kCanonical}), kCanonical);
}

TEST(RequestId, NoSuppliedValueGivesANewId) {
  EXPECT_TRUE(IsCanonicalUuid(ChooseRequestId({})));
}

TEST(RequestId, NewUuidIsCanonicalVersion4) {
  for (int i = 0; i < 100; ++i) {
    const std::string uuid = NewUuid();
    ASSERT_TRUE(IsCanonicalUuid(uuid)) << uuid;
    EXPECT_EQ(uuid[14], '4') << uuid;  // version nibble
    EXPECT_NE(std::string_view("89ab").find(uuid[19]), std::string_view::npos)
        << uuid;  // RFC 4122 variant: 10xx
  }
}

TEST(RequestId, NewUuidDiffersBetweenCalls) {
  EXPECT_NE(NewUuid(), NewUuid());
}

}  // namespace
}  // namespace kc::server
