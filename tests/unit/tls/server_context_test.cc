#include "tls/server_context.h"

#include <fstream>

#include <gtest/gtest.h>

#include "../contains.h"
#include "../temp_dir.h"
#include "memory_handshake.h"
#include "test_identity.h"

namespace kc::tls {
namespace {

using kc::testing::Contains;

class ServerContextTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_.path() / name).string();
    std::ofstream(path) << text;
    return path;
  }

  kc::testing::TempDir dir_;
};

TEST_F(ServerContextTest, AMatchingCertificateAndKeyServeAHandshake) {
  auto context = MakeServerContext(kc::testing::WriteSelfSigned(dir_.path(), "server"));
  ASSERT_TRUE(context.ok()) << context.status().message();
  auto client = kc::testing::ClientContext(TLS1_2_VERSION, TLS1_3_VERSION);
  const auto result = kc::testing::Handshake(context->native_handle(), client.get());
  EXPECT_TRUE(result.ok) << result.server_error << " / " << result.client_error;
  EXPECT_EQ(result.version, "TLSv1.3");
}

TEST_F(ServerContextTest, AMissingCertificateNamesTheFileAndTheReason) {
  TlsIdentity identity = kc::testing::WriteSelfSigned(dir_.path(), "server");
  identity.cert_file = (dir_.path() / "absent.crt").string();
  auto context = MakeServerContext(identity);
  ASSERT_FALSE(context.ok());
  EXPECT_EQ(context.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(context.status().message(), identity.cert_file));
  EXPECT_TRUE(Contains(context.status().message(), "No such file or directory"));
}

TEST_F(ServerContextTest, AGarbageCertificateNamesTheFileAndOpenSslsReason) {
  TlsIdentity identity = kc::testing::WriteSelfSigned(dir_.path(), "server");
  identity.cert_file = Write("garbage.crt", "this is not PEM\n");
  auto context = MakeServerContext(identity);
  ASSERT_FALSE(context.ok());
  EXPECT_TRUE(Contains(context.status().message(), identity.cert_file));
  EXPECT_TRUE(Contains(context.status().message(), "no start line"));
}

TEST_F(ServerContextTest, AGarbageKeyNamesTheKeyFile) {
  TlsIdentity identity = kc::testing::WriteSelfSigned(dir_.path(), "server");
  identity.key_file = Write("garbage.key", "-----BEGIN PRIVATE KEY-----\nAAAA\n");
  auto context = MakeServerContext(identity);
  ASSERT_FALSE(context.ok());
  EXPECT_TRUE(Contains(context.status().message(), "TLS key file '" + identity.key_file + "'"));
}

TEST_F(ServerContextTest, TheKeyOfAnotherCertificateIsRefused) {
  TlsIdentity identity = kc::testing::WriteSelfSigned(dir_.path(), "server");
  identity.key_file = kc::testing::WriteSelfSigned(dir_.path(), "other").key_file;
  auto context = MakeServerContext(identity);
  ASSERT_FALSE(context.ok());
  EXPECT_TRUE(Contains(context.status().message(), "does not belong to the certificate"));
  EXPECT_TRUE(Contains(context.status().message(), identity.key_file));
}

// Nobody could type a passphrase: refused at once, not prompted for on the terminal.
TEST_F(ServerContextTest, AnEncryptedKeyIsRefusedWithoutAPrompt) {
  TlsIdentity identity = kc::testing::WriteSelfSigned(dir_.path(), "server", "secret");
  auto context = MakeServerContext(identity);
  ASSERT_FALSE(context.ok());
  EXPECT_TRUE(Contains(context.status().message(), identity.key_file));
}

}  // namespace
}  // namespace kc::tls
