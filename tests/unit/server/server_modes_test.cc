#include "server/core/server_modes.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kc::server {
namespace {

// Every value of a flag shows as a text that parses back to it.
template <typename Mode, size_t N>
void ExpectRoundTrips(const FlagValue<Mode> (&values)[N]) {
  for (const FlagValue<Mode>& value : values) {
    EXPECT_EQ(ParseFlag(values, FlagText(value.mode)), value.mode) << value.text;
    EXPECT_EQ(ParseFlag(values, value.text), value.mode) << value.text;
  }
}

TEST(ServerModes, EveryValueRoundTrips) {
  ExpectRoundTrips(kDeviceFlag);
  ExpectRoundTrips(kHousekeepingFlag);
  ExpectRoundTrips(kSandboxFlag);
  ExpectRoundTrips(kSandboxNetworkFlag);
  ExpectRoundTrips(kCpuExecutionFlag);
}

TEST(ServerModes, TextsAreTheFlagsOwn) {
  // --help lists these, in this order; /health and the worker's environment show them.
  EXPECT_EQ(FlagTexts(kDeviceFlag), (std::vector<std::string>{"cpu", "gpu"}));
  EXPECT_EQ(FlagTexts(kHousekeepingFlag),
            (std::vector<std::string>{"outside-spans", "contexts-beside-spans", "beside-spans"}));
  EXPECT_EQ(FlagTexts(kSandboxFlag),
            (std::vector<std::string>{"namespaces", "bubblewrap", "none"}));
  EXPECT_EQ(FlagTexts(kSandboxNetworkFlag), (std::vector<std::string>{"none", "host"}));
  EXPECT_EQ(FlagTexts(kCpuExecutionFlag), (std::vector<std::string>{"host", "reference"}));
  EXPECT_EQ(FlagText(Device::kGpu), "gpu");
  EXPECT_EQ(FlagText(pool::HousekeepingPolicy::kBesideSpans), "beside-spans");
  EXPECT_EQ(FlagText(SandboxNetwork::kHost), "host");
  EXPECT_EQ(FlagText(CpuExecution::kReference), "reference");
}

TEST(ServerModes, BubblewrapIsAnAliasShownAsNamespaces) {
  EXPECT_EQ(ParseFlag(kSandboxFlag, "bubblewrap"), SandboxMode::kNamespaces);
  EXPECT_EQ(FlagText(SandboxMode::kNamespaces), "namespaces");
  EXPECT_EQ(FlagText(SandboxMode::kNone), "none");
}

TEST(ServerModes, UnknownTextIsNullopt) {
  EXPECT_EQ(ParseFlag(kDeviceFlag, "tpu"), std::nullopt);
  EXPECT_EQ(ParseFlag(kDeviceFlag, "GPU"), std::nullopt);  // as CLI::IsMember: exact
  EXPECT_EQ(ParseFlag(kSandboxFlag, ""), std::nullopt);
}

}  // namespace
}  // namespace kc::server
