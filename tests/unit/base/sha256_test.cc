#include "base/sha256.h"

#include <string>

#include <gtest/gtest.h>

namespace kc {
namespace {

// FIPS 180-2 test vectors.
constexpr char kEmptyDigest[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kAbcDigest[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr char kTwoBlockMessage[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
constexpr char kTwoBlockDigest[] =
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";

TEST(Sha256, EmptyStringHasTheKnownDigest) {
  EXPECT_EQ(Sha256Hex(""), kEmptyDigest);
}

TEST(Sha256, AbcHasTheKnownDigest) {
  EXPECT_EQ(Sha256Hex("abc"), kAbcDigest);
}

TEST(Sha256, TwoBlockMessageHasTheKnownDigest) {
  EXPECT_EQ(Sha256Hex(kTwoBlockMessage), kTwoBlockDigest);
}

TEST(Sha256, MillionAsHaveTheKnownDigest) {
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalUpdatesMatchOneShot) {
  Sha256 hasher;
  std::string message = kTwoBlockMessage;
  for (char c : message)
    hasher.Update(&c, 1);
  EXPECT_EQ(hasher.HexDigest(), kTwoBlockDigest);
}

TEST(Sha256, NoUpdateIsTheEmptyDigest) {
  Sha256 hasher;
  EXPECT_EQ(hasher.HexDigest(), kEmptyDigest);
}

TEST(Sha256, DigestIsItselfValidHex) {
  EXPECT_TRUE(IsSha256Hex(Sha256Hex("anything")));
}

TEST(IsSha256Hex, AcceptsSixtyFourLowercaseHexCharacters) {
  EXPECT_TRUE(IsSha256Hex(kAbcDigest));
  EXPECT_TRUE(IsSha256Hex(std::string(64, '0')));
}

TEST(IsSha256Hex, RejectsUppercase) {
  std::string upper = kAbcDigest;
  upper[0] = 'B';
  EXPECT_FALSE(IsSha256Hex(upper));
}

TEST(IsSha256Hex, RejectsWrongLengths) {
  std::string digest = kAbcDigest;
  EXPECT_FALSE(IsSha256Hex(digest.substr(0, 63)));
  EXPECT_FALSE(IsSha256Hex(digest + "0"));
  EXPECT_FALSE(IsSha256Hex(""));
}

TEST(IsSha256Hex, RejectsNonHexCharacters) {
  std::string digest = kAbcDigest;
  digest[10] = 'g';
  EXPECT_FALSE(IsSha256Hex(digest));
  digest[10] = '/';
  EXPECT_FALSE(IsSha256Hex(digest));
}

}  // namespace
}  // namespace kc
