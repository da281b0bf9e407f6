#include "tls/client_context.h"

#include <fstream>

#include <gtest/gtest.h>

#include "../contains.h"
#include "../temp_dir.h"
#include "memory_handshake.h"
#include "test_identity.h"
#include "tls/server_context.h"

namespace kc::tls {
namespace {

using kc::testing::Contains;

// A server whose self-signed certificate names "localhost" (test_identity.h), and clients that
// trust it, or another certificate, as their CA.
class ClientContextTest : public ::testing::Test {
 protected:
  ClientContextTest()
      : identity_(kc::testing::WriteSelfSigned(dir_.path(), "server")),
        stranger_(kc::testing::WriteSelfSigned(dir_.path(), "stranger")),
        server_(MakeServerContext(identity_).value()) {}

  kc::testing::HandshakeResult HandshakeExpecting(boost::asio::ssl::context& client,
                                                  const std::string& host) {
    return kc::testing::Handshake(server_.native_handle(), client.native_handle(),
                                  [&](SSL* ssl) { ASSERT_TRUE(ExpectPeerName(ssl, host).ok()); });
  }

  kc::testing::TempDir dir_;
  TlsIdentity identity_;
  TlsIdentity stranger_;
  boost::asio::ssl::context server_;
};

TEST_F(ClientContextTest, APeerSignedByTheCaAndNamingTheHostIsAccepted) {
  auto client = MakeClientContext(identity_.cert_file);
  ASSERT_TRUE(client.ok()) << client.status().message();
  const auto result = HandshakeExpecting(*client, "localhost");
  EXPECT_TRUE(result.ok) << result.server_error << " / " << result.client_error;
  EXPECT_EQ(result.version, "TLSv1.3");
}

TEST_F(ClientContextTest, APeerNotSignedByTheCaIsRefused) {
  auto client = MakeClientContext(stranger_.cert_file);
  ASSERT_TRUE(client.ok()) << client.status().message();
  const auto result = HandshakeExpecting(*client, "localhost");
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(Contains(result.client_error, "certificate verify failed")) << result.client_error;
}

TEST_F(ClientContextTest, APeerNamingAnotherHostIsRefused) {
  auto client = MakeClientContext(identity_.cert_file);
  ASSERT_TRUE(client.ok());
  EXPECT_FALSE(HandshakeExpecting(*client, "gpu-7.example").ok);
  EXPECT_FALSE(HandshakeExpecting(*client, "10.0.0.5").ok);  // an address: its IP entries only
}

TEST_F(ClientContextTest, TheSameClientHasTheServersPolicy) {
  auto client = MakeClientContext(identity_.cert_file);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(SSL_CTX_get_min_proto_version(client->native_handle()), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_verify_mode(client->native_handle()), SSL_VERIFY_PEER);
}

TEST_F(ClientContextTest, AMissingOrEmptyCaFileNamesTheFile) {
  const std::string absent = (dir_.path() / "absent.pem").string();
  auto missing = MakeClientContext(absent);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(missing.status().message(), absent)) << missing.status().message();

  const std::string empty = (dir_.path() / "empty.pem").string();
  std::ofstream(empty) << "not a certificate\n";
  auto garbage = MakeClientContext(empty);
  ASSERT_FALSE(garbage.ok());
  EXPECT_TRUE(Contains(garbage.status().message(), empty)) << garbage.status().message();
}

TEST_F(ClientContextTest, AnUnverifiedClientAcceptsAnyPeer) {
  auto client = MakeUnverifiedClientContext();
  ASSERT_TRUE(client.ok());
  const auto result = HandshakeExpecting(*client, "gpu-7.example");
  EXPECT_TRUE(result.ok) << result.client_error;
}

}  // namespace
}  // namespace kc::tls
