#include "base/hmac_sha256.h"

#include <string>

#include <gtest/gtest.h>

namespace kc {
namespace {

// RFC 4231 §4, HMAC-SHA-256 rows.
TEST(HmacSha256, Rfc4231Case1ShortKey) {
  EXPECT_EQ(HmacSha256Hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(HmacSha256, Rfc4231Case2KeyShorterThanOutput) {
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HmacSha256, Rfc4231Case3CombinedLengthOverBlock) {
  EXPECT_EQ(HmacSha256Hex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
}

TEST(HmacSha256, Rfc4231Case4) {
  std::string key;
  for (int i = 1; i <= 25; ++i)
    key.push_back(static_cast<char>(i));
  EXPECT_EQ(HmacSha256Hex(key, std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
}

TEST(HmacSha256, Rfc4231Case5TruncatedTo128Bits) {
  EXPECT_EQ(HmacSha256Hex(std::string(20, '\x0c'), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
}

TEST(HmacSha256, Rfc4231Case6KeyLargerThanBlock) {
  EXPECT_EQ(HmacSha256Hex(std::string(131, '\xaa'),
                          "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, Rfc4231Case7KeyAndDataLargerThanBlock) {
  EXPECT_EQ(HmacSha256Hex(std::string(131, '\xaa'),
                          "This is a test using a larger than block-size key and a larger than "
                          "block-size data. The key needs to be hashed before being used by the "
                          "HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256, RawMacIs32BytesOfTheHex) {
  const std::string mac = HmacSha256("Jefe", "what do ya want for nothing?");
  ASSERT_EQ(mac.size(), kHmacSha256Bytes);
  EXPECT_EQ(HexEncode(mac), HmacSha256Hex("Jefe", "what do ya want for nothing?"));
}

TEST(HmacSha256, ConstantTimeEqualsComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(HmacSha256, HexRoundTripsAndRefusesBadText) {
  const std::string bytes("\x00\x7f\x80\xff", 4);
  EXPECT_EQ(HexEncode(bytes), "007f80ff");
  EXPECT_EQ(HexDecode("007F80ff"), bytes);
  EXPECT_EQ(HexDecode(""), std::string());
  EXPECT_FALSE(HexDecode("abc").has_value());  // odd length
  EXPECT_FALSE(HexDecode("zz").has_value());
}

}  // namespace
}  // namespace kc
