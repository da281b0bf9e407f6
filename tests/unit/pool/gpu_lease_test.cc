#include "pool/gpu_lease.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "wait_until.h"

namespace kc::pool {
namespace {

using namespace std::chrono_literals;

using testing::WaitUntil;

TEST(GpuLease, FirstCallerIsGrantedAtOnce) {
  GpuArbiter arbiter({3});
  GpuLease lease(arbiter, {3});
  EXPECT_EQ(lease.gpus(), std::vector<int>{3});
  lease.Acquire("req-1");
  EXPECT_EQ(lease.depth(), 1);
  EXPECT_EQ(lease.HolderAt(NowNs()), "req-1");
  lease.Release();
  EXPECT_EQ(lease.depth(), 0);
}

TEST(GpuLease, SecondCallerWaits) {
  GpuArbiter arbiter({0});
  GpuLease lease(arbiter, {0});
  lease.Acquire("first");
  std::atomic<bool> granted{false};
  std::thread second([&] {
    lease.Acquire("second");
    granted = true;
    lease.Release();
  });
  ASSERT_TRUE(WaitUntil([&] { return lease.depth() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(granted);
  lease.Release();
  second.join();
  EXPECT_TRUE(granted);
  EXPECT_EQ(lease.depth(), 0);
}

TEST(GpuLease, WaitersAreGrantedInArrivalOrder) {
  GpuArbiter arbiter({0});
  GpuLease lease(arbiter, {0});
  lease.Acquire("holder");
  std::mutex mu;
  std::vector<int> grant_order;
  std::vector<std::thread> waiters;
  constexpr int kWaiters = 5;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      lease.Acquire("waiter-" + std::to_string(i));
      {
        std::lock_guard lock(mu);
        grant_order.push_back(i);
      }
      std::this_thread::sleep_for(1ms);
      lease.Release();
    });
    // The next waiter starts only once this one is queued.
    ASSERT_TRUE(WaitUntil([&] { return lease.depth() == i + 2; }));
    std::this_thread::sleep_for(2ms);
  }
  lease.Release();
  for (auto& waiter : waiters)
    waiter.join();
  EXPECT_EQ(grant_order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(lease.depth(), 0);
}

TEST(GpuLease, HolderAtAnswersForTenuresAndGaps) {
  GpuArbiter arbiter({0});
  GpuLease lease(arbiter, {0});
  const int64_t before = NowNs();
  std::this_thread::sleep_for(2ms);

  lease.Acquire("a");
  std::this_thread::sleep_for(2ms);
  const int64_t during_a = NowNs();
  std::this_thread::sleep_for(2ms);
  lease.Release();

  std::this_thread::sleep_for(2ms);
  const int64_t gap = NowNs();
  std::this_thread::sleep_for(2ms);

  lease.Acquire("b");
  std::this_thread::sleep_for(2ms);
  const int64_t during_b = NowNs();
  EXPECT_EQ(lease.HolderAt(during_b), "b");  // the current holder, while held
  EXPECT_EQ(lease.HolderAt(NowNs()), "b");
  std::this_thread::sleep_for(2ms);
  lease.Release();

  std::this_thread::sleep_for(2ms);
  const int64_t after = NowNs();

  EXPECT_EQ(lease.HolderAt(before), std::nullopt);
  EXPECT_EQ(lease.HolderAt(during_a), "a");
  EXPECT_EQ(lease.HolderAt(gap), std::nullopt);
  EXPECT_EQ(lease.HolderAt(during_b), "b");  // from the history, once released
  EXPECT_EQ(lease.HolderAt(after), std::nullopt);
}

TEST(GpuLease, DepthCountsHolderAndWaiters) {
  GpuArbiter arbiter({0});
  GpuLease lease(arbiter, {0});
  EXPECT_EQ(lease.depth(), 0);
  lease.Acquire("holder");
  EXPECT_EQ(lease.depth(), 1);
  std::vector<std::thread> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      lease.Acquire("waiter-" + std::to_string(i));
      lease.Release();
    });
  }
  EXPECT_TRUE(WaitUntil([&] { return lease.depth() == 3; }));
  lease.Release();
  for (auto& waiter : waiters)
    waiter.join();
  EXPECT_EQ(lease.depth(), 0);
}

TEST(GpuLease, ReleaseWithoutHoldingIsANoOp) {
  GpuArbiter arbiter({0});
  GpuLease lease(arbiter, {0});
  lease.Release();
  EXPECT_EQ(lease.depth(), 0);
  EXPECT_EQ(lease.HolderAt(NowNs()), std::nullopt);

  lease.Acquire("a");
  lease.Release();
  const int64_t after_first = NowNs();
  lease.Release();  // a second release records no tenure
  EXPECT_EQ(lease.depth(), 0);
  std::this_thread::sleep_for(1ms);
  EXPECT_EQ(lease.HolderAt(after_first + 500'000), std::nullopt);

  lease.Acquire("b");  // the lease is still grantable
  EXPECT_EQ(lease.HolderAt(NowNs()), "b");
  lease.Release();
}

}  // namespace
}  // namespace kc::pool
