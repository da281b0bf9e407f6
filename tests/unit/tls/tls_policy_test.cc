#include "tls/tls_policy.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "../contains.h"
#include "../temp_dir.h"
#include "memory_handshake.h"
#include "test_identity.h"
#include "tls/server_context.h"

namespace kc::tls {
namespace {

using kc::testing::Contains;

class TlsPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made = MakeServerContext(kc::testing::WriteSelfSigned(dir_.path(), "server"));
    ASSERT_TRUE(made.ok()) << made.status().message();
    server_.emplace(std::move(*made));
  }

  kc::testing::HandshakeResult HandshakeWith(int min_version, int max_version,
                                             const char* ciphers = "DEFAULT:@SECLEVEL=0") {
    auto client = kc::testing::ClientContext(min_version, max_version, ciphers);
    return kc::testing::Handshake(server_->native_handle(), client.get());
  }

  kc::testing::TempDir dir_;
  std::optional<boost::asio::ssl::context> server_;
};

TEST_F(TlsPolicyTest, Tls13IsPreferred) {
  const auto result = HandshakeWith(TLS1_VERSION, TLS1_3_VERSION);
  ASSERT_TRUE(result.ok) << result.server_error;
  EXPECT_EQ(result.version, "TLSv1.3");
}

TEST_F(TlsPolicyTest, Tls12GetsAForwardSecretAeadCipher) {
  const auto result = HandshakeWith(TLS1_2_VERSION, TLS1_2_VERSION);
  ASSERT_TRUE(result.ok) << result.server_error;
  EXPECT_EQ(result.version, "TLSv1.2");
  EXPECT_EQ(result.cipher.rfind("ECDHE-ECDSA-", 0), 0u) << result.cipher;
  EXPECT_TRUE(Contains(kTls12Ciphers, result.cipher));
}

TEST_F(TlsPolicyTest, Tls11AndOlderAreRefusedByTheServer) {
  for (int version : {TLS1_VERSION, TLS1_1_VERSION}) {
    const auto result = HandshakeWith(TLS1_VERSION, version);
    EXPECT_FALSE(result.ok) << version;
    EXPECT_TRUE(Contains(result.server_error, "unsupported protocol")) << version;
  }
}

TEST_F(TlsPolicyTest, Tls12WithoutForwardSecrecyOrAeadIsRefused) {
  // RSA key exchange, and ECDHE with CBC: each was common once.
  for (const char* cipher : {"AES128-GCM-SHA256", "ECDHE-ECDSA-AES128-SHA"}) {
    const auto result = HandshakeWith(TLS1_2_VERSION, TLS1_2_VERSION, cipher);
    EXPECT_FALSE(result.ok) << cipher;
    EXPECT_TRUE(Contains(result.server_error, "no shared cipher")) << cipher;
  }
}

TEST_F(TlsPolicyTest, CompressionAndRenegotiationAreOff) {
  const uint64_t options = SSL_CTX_get_options(server_->native_handle());
  EXPECT_NE(options & SSL_OP_NO_COMPRESSION, 0u);
  EXPECT_NE(options & SSL_OP_NO_RENEGOTIATION, 0u);
}

}  // namespace
}  // namespace kc::tls
