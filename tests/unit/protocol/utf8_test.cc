#include "protocol/utf8.h"

#include <string>

#include <gtest/gtest.h>

namespace kc::protocol {
namespace {

TEST(Utf8, ScansWellFormedSequences) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  EXPECT_EQ(ScanUtf8(text, 0).length, 1u);
  EXPECT_EQ(ScanUtf8(text, 1).length, 2u);
  EXPECT_EQ(ScanUtf8(text, 3).length, 3u);
  EXPECT_EQ(ScanUtf8(text, 6).length, 4u);
  EXPECT_TRUE(ScanUtf8(text, 6).valid);
}

TEST(Utf8, IllFormedSequencesAreTheirMaximalSubpart) {
  EXPECT_FALSE(ScanUtf8("\x80", 0).valid);
  EXPECT_EQ(ScanUtf8("\xE2\x82", 0).length, 2u);          // cut off
  EXPECT_EQ(ScanUtf8("\xE2\x82x", 0).length, 2u);         // interrupted
  EXPECT_EQ(ScanUtf8("\xED\xA0\x80", 0).length, 1u);      // encoded surrogate
  EXPECT_EQ(ScanUtf8("\xC0\xAF", 0).length, 1u);          // overlong
  EXPECT_EQ(ScanUtf8("\xF4\x90\x80\x80", 0).length, 1u);  // above U+10FFFF
  EXPECT_FALSE(ScanUtf8("\xF4\x90\x80\x80", 0).valid);
}

TEST(Utf8, ReplacementMatchesPython) {
  // bytes.decode("utf-8", "replace") in CPython gives the same.
  EXPECT_EQ(ToValidUtf8("ok\xFF\xFE!"), "ok\xEF\xBF\xBD\xEF\xBF\xBD!");
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(ToValidUtf8("\xE2\x82x"), "\xEF\xBF\xBDx");
  EXPECT_EQ(ToValidUtf8("h\xC3\xA9"), "h\xC3\xA9");
}

TEST(Utf8, SurrogatesRoundTripThroughWtf8) {
  for (uint32_t unit : {0xD800u, 0xDBFFu, 0xDC00u, 0xDFFFu}) {
    std::string text;
    AppendUtf8(text, unit);
    uint16_t back = 0;
    ASSERT_TRUE(IsWtf8Surrogate(text, 0, &back));
    EXPECT_EQ(back, unit);
  }
  uint16_t unused = 0;
  EXPECT_FALSE(IsWtf8Surrogate("\xED\x9F\xBF", 0, &unused));  // U+D7FF
  EXPECT_FALSE(IsWtf8Surrogate("\xED\xA0", 0, &unused));
}

}  // namespace
}  // namespace kc::protocol
