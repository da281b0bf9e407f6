#include "server/tenancy/tenant_quotas.h"

#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "../contains.h"
#include "server/tenancy/access_keys.h"
#include "server/tenancy/tenant_limits.h"

namespace kc::server {
namespace {

using namespace std::chrono_literals;

TEST(TenantLimits, ParsesEveryNameAndSuffix) {
  auto limits =
      ParseTenantLimits({"in_flight=8", "queued=100", "gpu_seconds=600", "cpu_seconds=1.5",
                         "max_request_bytes=2M", "gpu_count=1", "weight=3"});
  ASSERT_TRUE(limits.ok()) << limits.status().message();
  EXPECT_EQ(*limits->in_flight, 8);
  EXPECT_EQ(*limits->queued, 100);
  EXPECT_DOUBLE_EQ(*limits->gpu_seconds, 600);
  EXPECT_DOUBLE_EQ(*limits->cpu_seconds, 1.5);
  EXPECT_EQ(*limits->max_request_bytes, 2 << 20);
  EXPECT_EQ(*limits->gpu_count, 1);
  EXPECT_DOUBLE_EQ(limits->weight, 3);
}

TEST(TenantLimits, NamesTheBadField) {
  EXPECT_TRUE(
      testing::Contains(ParseTenantLimits({"queued=-1"}).status().message(), "limit 'queued'"));
  EXPECT_TRUE(testing::Contains(ParseTenantLimits({"weight=0"}).status().message(), "above 0"));
  EXPECT_TRUE(testing::Contains(ParseTenantLimits({"speed=9"}).status().message(),
                                "unknown limit 'speed'"));
  EXPECT_TRUE(
      testing::Contains(ParseTenantLimits({"gpu_seconds=lots"}).status().message(), "'lots'"));
}

TEST(AccessKeysLimits, ATenantsLineElseTheStarLineElseNone) {
  const std::string sha(64, 'a');
  auto keys = AccessKeys::Parse("alice " + sha +
                                    " tenant\n"
                                    "limits alice queued=3 weight=2\n"
                                    "limits * queued=1\n",
                                "keys");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(*keys->LimitsOf("alice").queued, 3);
  EXPECT_DOUBLE_EQ(keys->LimitsOf("alice").weight, 2);
  EXPECT_EQ(*keys->LimitsOf("bob").queued, 1);
  EXPECT_TRUE(keys->Knows(sha.substr(0, 16)));
  EXPECT_FALSE(keys->Knows(std::string(16, 'b')));
  auto twice =
      AccessKeys::Parse("alice " + sha + " tenant\nlimits a queued=1\nlimits a queued=2\n", "keys");
  EXPECT_TRUE(testing::Contains(twice.status().message(), "line 3: a second limits line for 'a'"));
  auto dotted = AccessKeys::Parse("al.ice " + sha + " tenant\n", "keys");
  EXPECT_TRUE(
      testing::Contains(dotted.status().message(), "letters, digits, '_' or '-', not 'al.ice'"));
  auto bad = AccessKeys::Parse("alice " + sha + " tenant\nlimits a queued=x\n", "keys");
  EXPECT_TRUE(testing::Contains(bad.status().message(), "line 2: limit 'queued'"));
}

TEST(TenantQuotas, InFlightAndQueuedFreeUp) {
  TenantQuotas quotas(60s);
  TenantLimits limits;
  limits.in_flight = 1;
  limits.queued = 2;
  EXPECT_FALSE(quotas.Enter("a", limits, 0));
  auto full = quotas.Enter("a", limits, 0);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->limit, "in_flight");
  EXPECT_TRUE(testing::Contains(full->message, "tenant 'a' limit in_flight=1"));
  EXPECT_FALSE(quotas.Enter("b", limits, 0));  // another tenant's count
  quotas.Leave("a");
  EXPECT_FALSE(quotas.Enter("a", limits, 1));
  quotas.Leave("a");
  EXPECT_EQ(quotas.Enter("a", limits, 2)->limit, "queued");
  EXPECT_EQ(quotas.Readings().at("a").refused.at("queued"), 1u);
}

TEST(TenantQuotas, ASpentBudgetSaysWhenItsWindowEnds) {
  const auto start = Clock::now() - 15s;  // 15 s into a 60 s window
  TenantQuotas quotas(60s, start);
  TenantLimits limits;
  limits.gpu_seconds = 10;
  ASSERT_FALSE(quotas.Enter("a", limits, 0));
  quotas.Leave("a");
  quotas.Charge("a", {12, 0});  // overdrawn by the run in progress: never killed for it
  auto spent = quotas.Enter("a", limits, 0);
  ASSERT_TRUE(spent);
  EXPECT_EQ(spent->limit, "gpu_seconds");
  EXPECT_NEAR(spent->retry_after_seconds, 45, 1);
  EXPECT_TRUE(
      testing::Contains(spent->message, "gpu_seconds=10.0 per 60 s window is spent (12.0 s used)"));
  auto usage = quotas.Usage("a", limits);
  EXPECT_DOUBLE_EQ(usage["gpu_seconds"]["remaining"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(usage["gpu_seconds_total"].get<double>(), 12);
}

TEST(TenantQuotas, ANewWindowStartsAfresh) {
  TenantQuotas quotas(1s, Clock::now());
  TenantLimits limits;
  limits.cpu_seconds = 0.5;
  quotas.Charge("a", {0, 1});
  ASSERT_TRUE(quotas.Enter("a", limits, 0));
  std::this_thread::sleep_for(1100ms);
  EXPECT_FALSE(quotas.Enter("a", limits, 0));
  EXPECT_DOUBLE_EQ(quotas.Readings().at("a").cpu_seconds_total, 1);  // totals stay
}

// Every node of a cluster names the same windows: they are counted from the Unix epoch.
TEST(TenantQuotas, WindowsAreCountedFromTheEpoch) {
  TenantQuotas quotas(60s);
  const auto usage = quotas.Usage("a", {});
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  const int64_t left =
      60 - std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count() % 60;
  EXPECT_NEAR(usage["window_ends_in_seconds"].get<int>(), left, 1);
}

// What the cluster's nodes charged (cluster/usage_ledger.h), in memory.
class MemoryLedger : public TenantQuotas::SharedLedger {
 public:
  void Add(const std::string& tenant, int64_t window, const RunUsage& used) override {
    RunUsage& sums = sums_[{tenant, window}];
    sums.gpu_seconds += used.gpu_seconds;
    sums.cpu_seconds += used.cpu_seconds;
  }
  std::optional<RunUsage> Read(const std::string& tenant, int64_t window) override {
    if (away) return std::nullopt;
    ++reads;
    return sums_[{tenant, window}];
  }
  bool away = false;
  int reads = 0;

 private:
  std::map<std::pair<std::string, int64_t>, RunUsage> sums_;
};

TEST(TenantQuotas, SecondsChargedOnOtherNodesCountAgainstTheBudget) {
  MemoryLedger ledger;
  TenantQuotas here(60s, Clock::now(), 7), there(60s, Clock::now(), 7);
  here.Share(&ledger);
  there.Share(&ledger);
  TenantLimits limits;
  limits.cpu_seconds = 1;
  there.Charge("a", {0, 1.5});  // ran on the other node
  auto spent = here.Enter("a", limits, 0);
  ASSERT_TRUE(spent);
  EXPECT_TRUE(testing::Contains(spent->message, "cpu_seconds=1.0 per 60 s window is spent (1.5 s"));
  EXPECT_DOUBLE_EQ(here.Usage("a", limits)["cpu_seconds"]["used"].get<double>(), 1.5);
  EXPECT_FALSE(here.Enter("b", limits, 0));  // another tenant's sums
  ledger.away = true;                        // the cluster cannot say: this node's own sums decide
  EXPECT_FALSE(here.Enter("a", limits, 0));
}

TEST(TenantQuotas, TheLedgerIsReadOnlyForASecondsBudget) {
  MemoryLedger ledger;
  TenantQuotas quotas(60s);
  quotas.Share(&ledger);
  EXPECT_FALSE(quotas.Enter("a", TenantLimits{}, 0));
  EXPECT_EQ(ledger.reads, 0);  // no budget of seconds: no round trip to the cluster
}

}  // namespace
}  // namespace kc::server
