#include "server/tenancy/access_keys.h"

#include <gtest/gtest.h>

#include "base/sha256.h"

namespace kc::server {
namespace {

TEST(AccessKeys, FindsTheCallerOfAKeyByItsHash) {
  const std::string text = "# comment\n\nalice " + Sha256Hex("key-a") + " tenant\nops " +
                           Sha256Hex("key-o") + " operator\nalice " + Sha256Hex("key-a2") +
                           " tenant\n";
  auto keys = AccessKeys::Parse(text, "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->size(), 3u);
  EXPECT_EQ(keys->Find("key-a")->tenant, "alice");
  EXPECT_EQ(keys->Find("key-a2")->tenant, "alice");  // a rotation: one tenant
  EXPECT_EQ(keys->Find("key-o")->role, Role::kOperator);
  EXPECT_FALSE(keys->Find("key-b").has_value());
  EXPECT_FALSE(keys->Find("").has_value());
  EXPECT_FALSE(keys->Find(Sha256Hex("key-a")).has_value());  // the hash is not a key
}

TEST(AccessKeys, BadLinesAreNamedWithoutEchoingWhatLooksLikeAKey) {
  auto plain = AccessKeys::Parse("alice my-secret-key tenant\n", "k");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("line 1"), std::string::npos);
  EXPECT_EQ(plain.status().message().find("my-secret-key"), std::string::npos);
  EXPECT_FALSE(AccessKeys::Parse("alice " + Sha256Hex("k") + " admin\n", "k").ok());
  EXPECT_FALSE(AccessKeys::Parse("alice " + Sha256Hex("k") + "\n", "k").ok());
  EXPECT_FALSE(AccessKeys::Parse("# nothing\n", "k").ok());
  const std::string twice = "a " + Sha256Hex("k") + " tenant\nb " + Sha256Hex("k") + " tenant\n";
  EXPECT_FALSE(AccessKeys::Parse(twice, "k").ok());
}

TEST(BearerKey, TakesTheKeyOfABearerHeaderOnly) {
  EXPECT_EQ(BearerKey("Bearer abc"), "abc");
  EXPECT_EQ(BearerKey("Basic abc"), "");
  EXPECT_EQ(BearerKey(""), "");
}

}  // namespace
}  // namespace kc::server
