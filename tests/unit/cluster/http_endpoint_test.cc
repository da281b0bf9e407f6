#include "cluster/http_endpoint.h"

#include <gtest/gtest.h>

namespace kc::cluster {
namespace {

TEST(HttpEndpoint, NameAndPortOfAnHttpUrl) {
  auto at = ParseHttpEndpoint("http://node-1:8001/path");
  ASSERT_TRUE(at.ok()) << at.status().message();
  EXPECT_FALSE(at->https);
  EXPECT_EQ(at->host, "node-1");
  EXPECT_EQ(at->port, "8001");
  EXPECT_EQ(at->HostHeader(), "node-1:8001");
}

TEST(HttpEndpoint, TheSchemesDefaultPort) {
  EXPECT_EQ(ParseHttpEndpoint("http://broker")->port, "80");
  auto secure = ParseHttpEndpoint("https://node.example");
  ASSERT_TRUE(secure.ok());
  EXPECT_TRUE(secure->https);
  EXPECT_EQ(secure->port, "443");
}

TEST(HttpEndpoint, AnIpv6AddressLosesItsBracketsAndTheHostHeaderKeepsThem) {
  auto at = ParseHttpEndpoint("https://[::1]:8443");
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->host, "::1");
  EXPECT_EQ(at->port, "8443");
  EXPECT_EQ(at->HostHeader(), "[::1]:8443");
}

TEST(HttpEndpoint, RefusesOtherSchemesAnUnclosedBracketAndNoHost) {
  EXPECT_FALSE(ParseHttpEndpoint("nats://a:4222").ok());
  EXPECT_FALSE(ParseHttpEndpoint("http://[::1:80").ok());
  EXPECT_FALSE(ParseHttpEndpoint("http://:80").ok());
}

}  // namespace
}  // namespace kc::cluster
