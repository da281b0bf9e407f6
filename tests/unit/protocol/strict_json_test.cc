#include "protocol/strict_json.h"

#include <string>

#include <gtest/gtest.h>

namespace kc::protocol {
namespace {

void ExpectInvalid(std::string_view text, std::string_view fragment = "") {
  StatusOr<nlohmann::json> parsed = ParseStrictJson(text);
  ASSERT_FALSE(parsed.ok()) << text;
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find(fragment), std::string::npos)
      << parsed.status().message();
}

TEST(StrictJson, ParsesNestedDocument) {
  StatusOr<nlohmann::json> parsed =
      ParseStrictJson(R"({"a": [1, -2, 3.5, "x", true, null, {"b": {}}], "c": []})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ((*parsed)["a"][0], 1);
  EXPECT_EQ((*parsed)["a"][1], -2);
  EXPECT_EQ((*parsed)["a"][2], 3.5);
  EXPECT_EQ((*parsed)["a"][3], "x");
  EXPECT_TRUE((*parsed)["a"][6]["b"].is_object());
  EXPECT_TRUE((*parsed)["c"].is_array());
}

TEST(StrictJson, ParsesScalarRoot) {
  StatusOr<nlohmann::json> parsed = ParseStrictJson("  42 ");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, 42);
}

TEST(StrictJson, ParsesLargeUnsignedInteger) {
  StatusOr<nlohmann::json> parsed = ParseStrictJson("18446744073709551615");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->is_number_unsigned());
}

TEST(StrictJson, AcceptsValidUtf8InStrings) {
  StatusOr<nlohmann::json> parsed = ParseStrictJson("\"h\xC3\xA9llo \xE2\x82\xAC \\u00e9\"");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
}

TEST(StrictJson, SameKeyInSiblingObjectsIsAllowed) {
  EXPECT_TRUE(ParseStrictJson(R"([{"a":1},{"a":2}])").ok());
  EXPECT_TRUE(ParseStrictJson(R"({"a":{"a":1}})").ok());
}

TEST(StrictJson, DuplicateTopLevelKeyIsInvalidArgument) {
  ExpectInvalid(R"({"a": 1, "a": 2})", "duplicate key 'a'");
}

TEST(StrictJson, DuplicateNestedKeyIsInvalidArgument) {
  ExpectInvalid(R"({"x": [{"k": 1, "y": 0, "k": 1}]})", "duplicate key 'k'");
}

TEST(StrictJson, DuplicateKeyAfterNestedObjectIsInvalidArgument) {
  ExpectInvalid(R"({"k": {"k": 1}, "k": 2})", "duplicate key 'k'");
}

TEST(StrictJson, NanLiteralIsInvalidArgument) {
  ExpectInvalid(R"({"a": NaN})");
}

TEST(StrictJson, InfinityLiteralIsInvalidArgument) {
  ExpectInvalid(R"([Infinity])");
}

TEST(StrictJson, NegativeInfinityLiteralIsInvalidArgument) {
  ExpectInvalid(R"([-Infinity])");
}

TEST(StrictJson, OverflowingNumberIsInvalidArgument) {
  ExpectInvalid("[1e999]", "1e999");
}

TEST(StrictJson, NegativeOverflowingNumberIsInvalidArgument) {
  ExpectInvalid("-1e400");
}

TEST(StrictJson, InvalidUtf8InStringIsInvalidArgument) {
  ExpectInvalid("\"\xC3\x28\"");
}

TEST(StrictJson, TruncatedUtf8InStringIsInvalidArgument) {
  ExpectInvalid("\"\xE2\x82\"");
}

TEST(StrictJson, OverlongUtf8IsInvalidArgument) {
  ExpectInvalid("\"\xC0\xAF\"");
}

TEST(StrictJson, EncodedSurrogateIsInvalidArgument) {
  ExpectInvalid("\"\xED\xA0\x80\"");
}

// Python's json reads and writes lone surrogates (the reference client sends
// them for such strings); nlohmann holds them as WTF-8 bytes.
TEST(StrictJson, LoneEscapedSurrogateIsAccepted) {
  StatusOr<nlohmann::json> parsed = ParseStrictJson(R"(["\ud800", "\udfff"])");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ((*parsed)[0].get<std::string>(), "\xED\xA0\x80");
  EXPECT_EQ((*parsed)[1].get<std::string>(), "\xED\xBF\xBF");
}

TEST(StrictJson, EscapedSurrogatePairIsOneCodePoint) {
  StatusOr<nlohmann::json> parsed = ParseStrictJson(R"("\ud83d\ude00")");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->get<std::string>(), "\xF0\x9F\x98\x80");
}

// Program arguments may be Python ints of any size (§4.2); the worker reads
// the digits from the program text, the validator sees the nearest double.
TEST(StrictJson, IntegerBeyond64BitsIsAccepted) {
  StatusOr<nlohmann::json> parsed = ParseStrictJson(
      "[1180591620717411303424, -36893488147419103232, " + std::string(400, '9') + "]");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_DOUBLE_EQ((*parsed)[0].get<double>(), 1180591620717411303424.0);
  EXPECT_DOUBLE_EQ((*parsed)[1].get<double>(), -36893488147419103232.0);
}

TEST(StrictJson, IntegerLongerThanPythonReadsIsInvalidArgument) {
  ExpectInvalid(std::string(4301, '7'), "4300 digits");
}

TEST(StrictJson, UnderflowingNumberIsZero) {
  StatusOr<nlohmann::json> parsed = ParseStrictJson("1e-400");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->get<double>(), 0.0);
}

TEST(StrictJson, NonUtf8OutsideStringIsInvalidArgument) {
  ExpectInvalid("[1]\xFF");
}

TEST(StrictJson, ByteOrderMarkIsInvalidArgument) {
  ExpectInvalid("\xEF\xBB\xBF{}", "byte order");
}

TEST(StrictJson, TrailingGarbageIsInvalidArgument) {
  ExpectInvalid("{} x");
}

TEST(StrictJson, SecondDocumentIsInvalidArgument) {
  ExpectInvalid("{}{}");
}

TEST(StrictJson, EmptyInputIsInvalidArgument) {
  ExpectInvalid("");
}

TEST(StrictJson, CommentIsInvalidArgument) {
  ExpectInvalid("{} // note");
}

TEST(StrictJson, TrailingCommaIsInvalidArgument) {
  ExpectInvalid("[1,]");
}

TEST(StrictJson, SingleQuotesAreInvalidArgument) {
  ExpectInvalid("{'a': 1}");
}

TEST(StrictJson, UnescapedControlCharacterIsInvalidArgument) {
  ExpectInvalid("\"a\nb\"");
}

TEST(StrictJson, ErrorMessageDropsLibraryPrefix) {
  StatusOr<nlohmann::json> parsed = ParseStrictJson("[1,");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message().find("[json.exception"), std::string::npos)
      << parsed.status().message();
  EXPECT_EQ(parsed.status().message().rfind("invalid JSON: ", 0), 0u);
}

TEST(StrictJson, ModerateNestingIsAccepted) {
  std::string text = std::string(500, '[') + std::string(500, ']');
  EXPECT_TRUE(ParseStrictJson(text).ok());
}

TEST(StrictJson, ExcessiveNestingIsInvalidArgument) {
  std::string text = std::string(5000, '[') + std::string(5000, ']');
  ExpectInvalid(text, "nesting");
}

}  // namespace
}  // namespace kc::protocol
