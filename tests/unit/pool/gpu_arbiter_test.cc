// The reservation logic of multi-GPU jobs over a fake inventory of eight GPUs:
// all-or-nothing, FIFO per GPU, no starvation of a waiting set, no deadlock
// between overlapping sets.
#include "pool/gpu_arbiter.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
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

const std::vector<int> kEightGpus = {0, 1, 2, 3, 4, 5, 6, 7};
constexpr auto kKernels = HousekeepingKind::kKernels;
constexpr auto kContext = HousekeepingKind::kContext;

// A thread that acquires `gpus` as `holder`, says when it got them, and holds
// them until told to let go.
class Acquirer {
 public:
  Acquirer(GpuArbiter& arbiter, std::vector<int> gpus, std::string holder)
      : arbiter_(arbiter), gpus_(std::move(gpus)) {
    thread_ = std::thread([this, holder] {
      arbiter_.Acquire(gpus_, holder);
      granted_ = true;
      while (!let_go_)
        std::this_thread::sleep_for(1ms);
      arbiter_.Release(gpus_);
    });
  }
  ~Acquirer() {
    let_go_ = true;
    thread_.join();
  }
  bool granted() const { return granted_; }
  void LetGo() { let_go_ = true; }

 private:
  GpuArbiter& arbiter_;
  const std::vector<int> gpus_;
  std::atomic<bool> granted_{false}, let_go_{false};
  std::thread thread_;
};

TEST(GpuArbiter, ASetIsGrantedOnlyWhenAllItsGpusAreFree) {
  GpuArbiter arbiter(kEightGpus);
  arbiter.Acquire({1}, "single");
  Acquirer set(arbiter, {0, 1}, "set");
  ASSERT_TRUE(WaitUntil([&] { return arbiter.depth(0) == 1 && arbiter.depth(1) == 2; }));
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(set.granted());
  // Waiting, it claims nothing: GPU 0 is queued on, not held.
  EXPECT_EQ(arbiter.HolderAt(0, NowNs()), std::nullopt);
  arbiter.Release({1});
  ASSERT_TRUE(WaitUntil([&] { return set.granted(); }));
  EXPECT_EQ(arbiter.HolderAt(0, NowNs()), "set");
  EXPECT_EQ(arbiter.HolderAt(1, NowNs()), "set");
}

TEST(GpuArbiter, AWaitingSetHoldsLaterSinglesBackSoItNeverStarves) {
  GpuArbiter arbiter(kEightGpus);
  arbiter.Acquire({1}, "running");
  Acquirer set(arbiter, {0, 1}, "set");
  ASSERT_TRUE(WaitUntil([&] { return arbiter.depth(1) == 2; }));
  // GPU 0 is free, but a later single-GPU request on it queues behind the set.
  Acquirer later(arbiter, {0}, "later");
  ASSERT_TRUE(WaitUntil([&] { return arbiter.depth(0) == 2; }));
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(later.granted());
  arbiter.Release({1});
  ASSERT_TRUE(WaitUntil([&] { return set.granted(); }));
  EXPECT_FALSE(later.granted());  // never shares the set's GPUs
  set.LetGo();
  ASSERT_TRUE(WaitUntil([&] { return later.granted(); }));
}

TEST(GpuArbiter, OtherGpusAreNotHeldBackBySetsThatDoNotUseThem) {
  GpuArbiter arbiter(kEightGpus);
  arbiter.Acquire({1}, "running");
  Acquirer set(arbiter, {0, 1}, "set");
  ASSERT_TRUE(WaitUntil([&] { return arbiter.depth(1) == 2; }));
  Acquirer elsewhere(arbiter, {2}, "elsewhere");
  EXPECT_TRUE(WaitUntil([&] { return elsewhere.granted(); }));
  arbiter.Release({1});
}

TEST(GpuArbiter, GivingUpLeavesEveryQueue) {
  GpuArbiter arbiter(kEightGpus);
  arbiter.Acquire({1}, "running");
  std::atomic<bool> give_up{false};
  std::atomic<bool> returned{false}, result{true};
  std::thread set([&] {
    result = arbiter.Acquire({0, 1}, "set", [&] { return give_up.load(); });
    returned = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return arbiter.depth(0) == 1; }));
  give_up = true;
  ASSERT_TRUE(WaitUntil([&] { return returned.load(); }));
  set.join();
  EXPECT_FALSE(result);
  EXPECT_EQ(arbiter.depth(0), 0);
  EXPECT_EQ(arbiter.depth(1), 1);
  Acquirer single(arbiter, {0}, "single");  // nothing is left in the way
  EXPECT_TRUE(WaitUntil([&] { return single.granted(); }));
  arbiter.Release({1});
}

TEST(GpuArbiter, ChooseTakesTheLeastBusyGpusThenTheLowest) {
  GpuArbiter arbiter(kEightGpus);
  EXPECT_EQ(*arbiter.Choose(2), (std::vector<int>{0, 1}));
  EXPECT_EQ(*arbiter.Choose(8), kEightGpus);
  arbiter.Acquire({0}, "a");
  arbiter.Acquire({2}, "b");
  EXPECT_EQ(*arbiter.Choose(3), (std::vector<int>{1, 3, 4}));
  EXPECT_FALSE(arbiter.Choose(9).ok());
  EXPECT_FALSE(arbiter.Choose(0).ok());
  arbiter.Release({0, 2});
}

TEST(GpuArbiter, ReleaseRecordsTheSetOnEveryGpu) {
  GpuArbiter arbiter(kEightGpus);
  const int64_t before = NowNs();
  arbiter.Acquire({3, 5}, "job");
  std::this_thread::sleep_for(2ms);
  const int64_t during = NowNs();
  arbiter.Release({3, 5});
  EXPECT_EQ(arbiter.HolderAt(3, during), "job");
  EXPECT_EQ(arbiter.HolderAt(5, during), "job");
  EXPECT_EQ(arbiter.HolderAt(4, during), std::nullopt);
  EXPECT_EQ(arbiter.HoldersBetween(5, before, NowNs()), std::vector<std::string>{"job"});
}

TEST(GpuArbiter, HousekeepingRunsTogetherButNeverDuringASpan) {
  GpuArbiter arbiter(kEightGpus);
  arbiter.BeginHousekeeping(0, kKernels);
  arbiter.BeginHousekeeping(0, kKernels);  // several at once: contexts created side by side
  std::atomic<bool> spanning{false};
  std::thread span([&] {
    const auto start = arbiter.BeginSpan({0});
    spanning = true;
    EXPECT_EQ(arbiter.EndSpan({0}, start), 0u);  // none overlapped it
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(spanning);  // the span waits for both to end
  arbiter.EndHousekeeping(0, kKernels);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(spanning);
  arbiter.EndHousekeeping(0, kKernels);
  ASSERT_TRUE(WaitUntil([&] { return spanning.load(); }));
  span.join();
}

TEST(GpuArbiter, HousekeepingWaitsForASpanAndOnlyOnItsGpu) {
  GpuArbiter arbiter(kEightGpus);
  const auto span = arbiter.BeginSpan({0});
  std::atomic<bool> on_0{false}, on_1{false};
  std::thread keeper_0([&] {
    arbiter.BeginHousekeeping(0, kKernels);
    on_0 = true;
    arbiter.EndHousekeeping(0, kKernels);
  });
  std::thread keeper_1([&] {
    arbiter.BeginHousekeeping(1, kKernels);
    on_1 = true;
    arbiter.EndHousekeeping(1, kKernels);
  });
  ASSERT_TRUE(WaitUntil([&] { return on_1.load(); }));  // another GPU: not held back
  std::this_thread::sleep_for(GpuArbiter::kHousekeepingPatience + 50ms);
  EXPECT_FALSE(on_0);  // never during the span, however long it waits
  EXPECT_EQ(arbiter.EndSpan({0}, span), 0u);
  ASSERT_TRUE(WaitUntil([&] { return on_0.load(); }));
  keeper_0.join();
  keeper_1.join();
}

TEST(GpuArbiter, WaitingSpansGoFirstUntilHousekeepingRunsOutOfPatience) {
  GpuArbiter arbiter(kEightGpus);
  const auto first = arbiter.BeginSpan({0});
  GpuArbiter::SpanStart second;
  std::atomic<bool> second_span{false};
  std::thread next_span([&] {
    second = arbiter.BeginSpan({0});  // queued behind the first, like the next benchmark
    second_span = true;
  });
  std::atomic<bool> kept{false};
  std::thread keeper([&] {
    arbiter.BeginHousekeeping(0, kKernels);
    kept = true;
    arbiter.EndHousekeeping(0, kKernels);
  });
  std::this_thread::sleep_for(20ms);
  arbiter.EndSpan({0}, first);  // a gap while a span waits: the span takes it
  ASSERT_TRUE(WaitUntil([&] { return second_span.load(); }));
  EXPECT_FALSE(kept);
  next_span.join();
  // Patience runs out during the second span; the third waits for the house-keeping.
  std::this_thread::sleep_for(GpuArbiter::kHousekeepingPatience);
  std::atomic<bool> third_span{false};
  std::thread last_span([&] {
    const auto third = arbiter.BeginSpan({0});
    EXPECT_TRUE(kept);  // the overdue house-keeping ran in the gap before it
    third_span = true;
    EXPECT_EQ(arbiter.EndSpan({0}, third), 0u);
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(arbiter.EndSpan({0}, second), 0u);
  keeper.join();
  last_span.join();
  EXPECT_TRUE(kept);
  EXPECT_TRUE(third_span);
}

TEST(GpuArbiter, ASpanOnASetWaitsForHousekeepingOnAnyOfItsGpus) {
  GpuArbiter arbiter(kEightGpus);
  arbiter.BeginHousekeeping(3, kKernels);
  std::atomic<bool> spanning{false};
  std::thread job([&] {
    const auto start = arbiter.BeginSpan({2, 3});
    EXPECT_GE(start.waited, 20ms);
    spanning = true;
    EXPECT_EQ(arbiter.EndSpan({2, 3}, start), 0u);
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(spanning);
  arbiter.EndHousekeeping(3, kKernels);
  ASSERT_TRUE(WaitUntil([&] { return spanning.load(); }));
  job.join();
}

TEST(GpuArbiter, BesideSpansNothingWaitsAndEverySpanCountsWhatRanBesideIt) {
  GpuArbiter arbiter(kEightGpus, HousekeepingPolicy::kBesideSpans);
  arbiter.BeginHousekeeping(0, kKernels);
  arbiter.EndHousekeeping(0, kKernels);    // over before the span: not counted
  arbiter.BeginHousekeeping(0, kKernels);  // still running when the span begins: counted
  const auto start = arbiter.BeginSpan({0});
  EXPECT_LT(start.waited, 10ms);
  arbiter.BeginHousekeeping(0, kKernels);  // begun during the span: counted, and not held back
  arbiter.EndHousekeeping(0, kKernels);
  arbiter.BeginHousekeeping(1, kKernels);  // another GPU: not counted
  arbiter.EndHousekeeping(1, kKernels);
  arbiter.EndHousekeeping(0, kKernels);
  EXPECT_EQ(arbiter.EndSpan({0}, start), 2u);
  const auto quiet = arbiter.BeginSpan({0});
  EXPECT_EQ(arbiter.EndSpan({0}, quiet), 0u);
}

TEST(GpuArbiter, ContextsBesideSpansLetsContextsThroughAndKernelsWait) {
  GpuArbiter arbiter(kEightGpus, HousekeepingPolicy::kContextsBesideSpans);
  arbiter.BeginHousekeeping(0, kContext);  // a context being created: the span does not wait
  const auto start = arbiter.BeginSpan({0});
  EXPECT_LT(start.waited, 10ms);
  arbiter.BeginHousekeeping(0, kContext);  // a retirement during the span: not held back
  arbiter.EndHousekeeping(0, kContext);
  std::atomic<bool> warmed{false};
  std::thread warm_up([&] {
    arbiter.BeginHousekeeping(0, kKernels);  // first kernels: wait for the span
    warmed = true;
    arbiter.EndHousekeeping(0, kKernels);
  });
  std::this_thread::sleep_for(GpuArbiter::kHousekeepingPatience + 50ms);
  EXPECT_FALSE(warmed);
  arbiter.EndHousekeeping(0, kContext);
  EXPECT_EQ(arbiter.EndSpan({0}, start), 2u);  // both context jobs ran beside it, and say so
  ASSERT_TRUE(WaitUntil([&] { return warmed.load(); }));
  warm_up.join();
  // A span waits for running kernels, never for a running context.
  arbiter.BeginHousekeeping(0, kKernels);
  std::atomic<bool> spanning{false};
  std::thread span([&] {
    const auto next = arbiter.BeginSpan({0});
    spanning = true;
    arbiter.EndSpan({0}, next);
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(spanning);
  arbiter.EndHousekeeping(0, kKernels);
  ASSERT_TRUE(WaitUntil([&] { return spanning.load(); }));
  span.join();
}

TEST(GpuArbiter, OutsideSpansKeepsContextsOutToo) {
  GpuArbiter arbiter(kEightGpus);  // the default: kOutsideSpans
  const auto start = arbiter.BeginSpan({0});
  std::atomic<bool> created{false};
  std::thread keeper([&] {
    arbiter.BeginHousekeeping(0, kContext);
    created = true;
    arbiter.EndHousekeeping(0, kContext);
  });
  std::this_thread::sleep_for(GpuArbiter::kHousekeepingPatience + 50ms);
  EXPECT_FALSE(created);
  EXPECT_EQ(arbiter.EndSpan({0}, start), 0u);
  ASSERT_TRUE(WaitUntil([&] { return created.load(); }));
  keeper.join();
}

TEST(GpuArbiter, ActivitiesReportDutyAndRunningHousekeeping) {
  GpuArbiter arbiter({0, 1});
  arbiter.BeginHousekeeping(1, kContext);
  const auto start = arbiter.BeginSpan({0});
  std::this_thread::sleep_for(20ms);
  const auto during = arbiter.Activities();
  ASSERT_EQ(during.size(), 2u);
  EXPECT_GT(during[0].duty.inside_seconds, 0.015);
  EXPECT_EQ(during[1].duty.inside_seconds, 0);
  EXPECT_EQ(during[1].housekeeping_running, 1);
  arbiter.EndSpan({0}, start);
  arbiter.EndHousekeeping(1, kContext);
  const auto after = arbiter.Activities();
  EXPECT_GT(after[0].duty.since_start, 0);
  EXPECT_LE(after[0].duty.since_start, 1);
  EXPECT_EQ(after[1].housekeeping_running, 0);
}

TEST(GpuArbiter, AReservationKeepsHousekeepingOutEvenBesideSpans) {
  GpuArbiter arbiter(kEightGpus, HousekeepingPolicy::kBesideSpans);
  const auto job = arbiter.BeginSpan({0, 1}, GpuArbiter::SpanKind::kReservation);
  std::atomic<bool> kept{false};
  std::thread keeper([&] {
    arbiter.BeginHousekeeping(1, kKernels);
    kept = true;
    arbiter.EndHousekeeping(1, kKernels);
  });
  std::this_thread::sleep_for(GpuArbiter::kHousekeepingPatience + 50ms);
  EXPECT_FALSE(kept);  // its GPUs are its own for its whole life
  EXPECT_EQ(arbiter.EndSpan({0, 1}, job), 0u);
  ASSERT_TRUE(WaitUntil([&] { return kept.load(); }));
  keeper.join();
}

// Random overlapping sets and singles from many threads: everyone is served
// (no deadlock) and no GPU ever has two holders at once.
TEST(GpuArbiter, OverlappingSetsNeverDeadlockOrShare) {
  GpuArbiter arbiter(kEightGpus);
  std::mutex mu;
  std::vector<int> users(8, 0);
  std::atomic<bool> shared{false};
  std::atomic<int> served{0};
  std::vector<std::thread> threads;
  constexpr int kThreads = 12, kRounds = 40;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(t);
      for (int round = 0; round < kRounds; ++round) {
        std::set<int> pick;
        const int size = 1 + static_cast<int>(random() % 4);
        while (static_cast<int>(pick.size()) < size)
          pick.insert(static_cast<int>(random() % 8));
        const std::vector<int> gpus(pick.begin(), pick.end());
        arbiter.Acquire(gpus, "t" + std::to_string(t));
        {
          std::lock_guard lock(mu);
          for (int g : gpus)
            if (++users[g] > 1) shared = true;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(random() % 300));
        {
          std::lock_guard lock(mu);
          for (int g : gpus)
            --users[g];
        }
        arbiter.Release(gpus);
        ++served;
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  EXPECT_FALSE(shared);
  EXPECT_EQ(served, kThreads * kRounds);
  for (int g : kEightGpus)
    EXPECT_EQ(arbiter.depth(g), 0);
}

TEST(GpuArbiter, ActivitiesNameTheHolderAndAddUpItsTime) {  // for the dashboard
  GpuArbiter arbiter({0, 1});
  ASSERT_TRUE(arbiter.Acquire({0}, "request-a"));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto held = arbiter.Activities();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].holder, "request-a");
  EXPECT_GE(held[0].held_seconds, 0.02);
  EXPECT_EQ(held[0].held_total_seconds, held[0].held_seconds);
  EXPECT_EQ(held[1].holder, "");
  arbiter.Release({0});
  const auto released = arbiter.Activities();
  EXPECT_EQ(released[0].holder, "");
  EXPECT_EQ(released[0].held_seconds, 0);
  EXPECT_GE(released[0].held_total_seconds, held[0].held_total_seconds);  // closed tenures stay
  EXPECT_EQ(released[1].held_total_seconds, 0);
}

}  // namespace
}  // namespace kc::pool

namespace kc::pool {
namespace {

// Tenants that keep the GPU's queue full, each thread holding for `hold` per grant.
double ShareOfFirstTenant(double weight_a, double weight_b) {
  GpuArbiter arbiter({0});
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<std::string, double> held;
  auto saturate = [&](std::string tenant, double weight) {
    while (!stop) {
      arbiter.Acquire({0}, tenant, {}, {tenant, weight});
      const auto since = Clock::now();
      std::this_thread::sleep_for(2ms);
      const double seconds = MillisecondsSince(since) / 1000;
      arbiter.Release({0});
      std::lock_guard lock(mu);
      held[tenant] += seconds;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {  // several waiters each, as seats would be
    threads.emplace_back(saturate, "a", weight_a);
    threads.emplace_back(saturate, "b", weight_b);
  }
  std::this_thread::sleep_for(1500ms);
  stop = true;
  for (auto& t : threads)
    t.join();
  return held["a"] / (held["a"] + held["b"]);
}

TEST(GpuArbiterFairShare, WeightsThreeToOneGiveThreeQuartersOfTheLeaseTime) {
  EXPECT_NEAR(ShareOfFirstTenant(3, 1), 0.75, 0.05);
}

TEST(GpuArbiterFairShare, EqualWeightsShareEqually) {
  EXPECT_NEAR(ShareOfFirstTenant(1, 1), 0.5, 0.05);
}

TEST(GpuArbiterFairShare, ALateTenantGoesBeforeAFloodsQueue) {
  GpuArbiter arbiter({0});
  arbiter.Acquire({0}, "flood-0", {}, {"flood", 1});
  std::vector<std::thread> flood;
  std::mutex mu;
  std::vector<std::string> order;
  for (int i = 1; i <= 5; ++i) {
    flood.emplace_back([&, i] {
      arbiter.Acquire({0}, "flood-" + std::to_string(i), {}, {"flood", 1});
      {
        std::lock_guard lock(mu);
        order.push_back("flood");
      }
      std::this_thread::sleep_for(1ms);
      arbiter.Release({0});
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return arbiter.depth(0) == 6; }));
  std::thread late([&] {
    arbiter.Acquire({0}, "late-1", {}, {"late", 1});
    {
      std::lock_guard lock(mu);
      order.push_back("late");
    }
    arbiter.Release({0});
  });
  ASSERT_TRUE(WaitUntil([&] { return arbiter.depth(0) == 7; }));
  std::this_thread::sleep_for(5ms);
  arbiter.Release({0});  // flood-0 charged: the late tenant is behind nobody
  late.join();
  for (auto& t : flood)
    t.join();
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order.front(), "late");
}

}  // namespace
}  // namespace kc::pool
