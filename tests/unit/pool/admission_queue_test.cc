#include "pool/admission_queue.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kc::pool {
namespace {

using namespace std::chrono_literals;

struct TestJob {
  int id = 0;
  Clock::time_point wait_deadline;
  TenantShare share;
};

std::shared_ptr<TestJob> MakeJob(int id, Clock::duration patience = 1h, std::string tenant = "",
                                 double weight = 1) {
  return std::make_shared<TestJob>(
      TestJob{id, Clock::now() + patience, {std::move(tenant), weight}});
}

// Collects the ids handed to on_expired, from any thread.
class ExpiredLog {
 public:
  AdmissionQueue<TestJob>::Expired Callback() {
    return [this](std::shared_ptr<TestJob> job) {
      std::lock_guard lock(mu_);
      ids_.push_back(job->id);
      cv_.notify_all();
    };
  }
  // The ids once at least `count` arrived, or what arrived within two seconds.
  std::vector<int> AwaitCount(size_t count) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 2s, [&] { return ids_.size() >= count; });
    return ids_;
  }
  std::vector<int> ids() {
    std::lock_guard lock(mu_);
    return ids_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> ids_;
};

TEST(AdmissionQueue, PushBeyondCapacityIsRefused) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(2, expired.Callback());
  EXPECT_TRUE(queue.Push(MakeJob(1)));
  EXPECT_TRUE(queue.Push(MakeJob(2)));
  EXPECT_FALSE(queue.Push(MakeJob(3)));
  EXPECT_EQ(queue.size(), 2u);

  ASSERT_NE(queue.Pop(), nullptr);  // a freed seat takes a push again
  EXPECT_TRUE(queue.Push(MakeJob(4)));
  EXPECT_EQ(queue.size(), 2u);
}

TEST(AdmissionQueue, PopIsFifo) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(8, expired.Callback());
  for (int id = 1; id <= 4; ++id)
    ASSERT_TRUE(queue.Push(MakeJob(id)));
  for (int id = 1; id <= 4; ++id) {
    auto job = queue.Pop();
    ASSERT_NE(job, nullptr);
    EXPECT_EQ(job->id, id);
  }
  EXPECT_EQ(queue.size(), 0u);
}

TEST(AdmissionQueue, PopWaitsForAPush) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(8, expired.Callback());
  std::shared_ptr<TestJob> popped;
  std::thread consumer([&] { popped = queue.Pop(); });
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(queue.Push(MakeJob(7)));
  consumer.join();
  ASSERT_NE(popped, nullptr);
  EXPECT_EQ(popped->id, 7);
}

TEST(AdmissionQueue, JobPastItsDeadlineIsExpiredWithoutPop) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(8, expired.Callback());
  ASSERT_TRUE(queue.Push(MakeJob(1, 30ms)));
  ASSERT_TRUE(queue.Push(MakeJob(2, 1h)));
  EXPECT_EQ(expired.AwaitCount(1), std::vector<int>{1});
  EXPECT_EQ(queue.size(), 1u);  // the patient job is still waiting
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(expired.ids(), std::vector<int>{1});
}

TEST(AdmissionQueue, JobAlreadyPastItsDeadlineIsExpiredPromptly) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(8, expired.Callback());
  ASSERT_TRUE(queue.Push(MakeJob(5, -1s)));
  EXPECT_EQ(expired.AwaitCount(1), std::vector<int>{5});
  EXPECT_EQ(queue.size(), 0u);
}

TEST(AdmissionQueue, CloseExpiresQueuedJobsAndRefusesPushes) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(8, expired.Callback());
  ASSERT_TRUE(queue.Push(MakeJob(1)));
  ASSERT_TRUE(queue.Push(MakeJob(2)));
  queue.Close();
  EXPECT_EQ(expired.ids(), (std::vector<int>{1, 2}));  // synchronously, in order
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_FALSE(queue.Push(MakeJob(3)));
  EXPECT_EQ(queue.Pop(), nullptr);
  queue.Close();  // idempotent
  EXPECT_EQ(expired.ids(), (std::vector<int>{1, 2}));
}

TEST(AdmissionQueue, CloseWakesABlockedPop) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(8, expired.Callback());
  std::shared_ptr<TestJob> popped = MakeJob(99);
  std::thread consumer([&] { popped = queue.Pop(); });
  std::this_thread::sleep_for(20ms);
  queue.Close();
  consumer.join();
  EXPECT_EQ(popped, nullptr);
}

TEST(AdmissionQueue, DestructorExpiresQueuedJobs) {
  ExpiredLog expired;
  {
    AdmissionQueue<TestJob> queue(8, expired.Callback());
    ASSERT_TRUE(queue.Push(MakeJob(1)));
  }
  EXPECT_EQ(expired.ids(), std::vector<int>{1});
}

TEST(AdmissionQueue, OneTenantIsServedInArrivalOrder) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(8, expired.Callback());
  for (int id = 1; id <= 4; ++id)
    ASSERT_TRUE(queue.Push(MakeJob(id, 1h, "a")));
  for (int id = 1; id <= 4; ++id) {
    auto job = queue.Pop();
    EXPECT_EQ(job->id, id);
    queue.Charge(*job, 1.0);
  }
}

TEST(AdmissionQueue, ALateTenantWaitsBehindNoneOfAFloodsQueue) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(512, expired.Callback());
  for (int id = 0; id < 200; ++id)
    ASSERT_TRUE(queue.Push(MakeJob(id, 1h, "flood")));
  auto first = queue.Pop();  // a flood job holds the seat
  ASSERT_TRUE(queue.Push(MakeJob(1000, 1h, "late")));
  queue.Charge(*first, 1.0);
  EXPECT_EQ(queue.Pop()->id, 1000);  // next, not 200th
}

TEST(AdmissionQueue, WeightsShareTheSeatTime) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(512, expired.Callback());
  for (int id = 0; id < 100; ++id) {
    ASSERT_TRUE(queue.Push(MakeJob(id, 1h, "a", 3)));
    ASSERT_TRUE(queue.Push(MakeJob(1000 + id, 1h, "b", 1)));
  }
  int a = 0;
  for (int i = 0; i < 80; ++i) {
    auto job = queue.Pop();
    a += job->share.tenant == "a";
    queue.Charge(*job, 0.5);
  }
  EXPECT_NEAR(a, 60, 1);  // 3:1
}

TEST(AdmissionQueue, TakeIfRemovesTheChosenWaitersAndCountsByTenant) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(8, expired.Callback());
  ASSERT_TRUE(queue.Push(MakeJob(1, 1h, "a")));
  ASSERT_TRUE(queue.Push(MakeJob(2, 1h, "b")));
  ASSERT_TRUE(queue.Push(MakeJob(3, 1h, "a")));
  EXPECT_EQ(queue.WaitingByTenant(), (std::map<std::string, int>{{"a", 2}, {"b", 1}}));
  auto taken = queue.TakeIf([](const TestJob& job) { return job.share.tenant == "a"; });
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0]->id, 1);
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.Pop()->id, 2);
}

// A GPU's seats feed the lease's queue, which shares the GPU by weight: each busy tenant gets
// seats in turn, so each keeps a request in that queue.
TEST(AdmissionQueue, AGpusSeatsGoToTheTenantHoldingFewest) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(512, expired.Callback());
  const AdmissionQueue<TestJob>::SeatGroup gpu{"gpu0", 2, true};
  for (int id = 0; id < 10; ++id)
    ASSERT_TRUE(queue.Push(MakeJob(id, 1h, "a", 3)));
  ASSERT_TRUE(queue.Push(MakeJob(100, 1h, "b", 1)));
  ASSERT_TRUE(queue.Push(MakeJob(101, 1h, "b", 1)));
  auto first = queue.Pop(gpu);
  auto second = queue.Pop(gpu);
  EXPECT_NE(first->share.tenant, second->share.tenant);  // one each, whatever the weights
  queue.Charge(*first, 1.0, gpu);
  EXPECT_EQ(queue.Pop(gpu)->share.tenant, first->share.tenant);  // it holds none now
}

TEST(AdmissionQueue, AGpuKeepsASpareSeatForATenantHoldingNone) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(512, expired.Callback());
  const AdmissionQueue<TestJob>::SeatGroup gpu{"gpu0", 4, true};
  for (int id = 0; id < 10; ++id)
    ASSERT_TRUE(queue.Push(MakeJob(id, 1h, "flood")));
  std::vector<std::shared_ptr<TestJob>> seated;
  for (int i = 0; i < 3; ++i)
    seated.push_back(queue.Pop(gpu));
  std::shared_ptr<TestJob> fourth;
  std::atomic<bool> popped{false};
  auto seat_taken = [&] { return popped.load(); };
  std::thread seat([&] {  // the flood may not take the last seat
    fourth = queue.Pop(gpu);
    popped = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(seat_taken());
  ASSERT_TRUE(queue.Push(MakeJob(1000, 1h, "late")));
  for (int i = 0; i < 200 && !seat_taken(); ++i)
    std::this_thread::sleep_for(10ms);
  if (!seat_taken()) queue.Close();  // a failure must not hang the test
  seat.join();
  ASSERT_NE(fourth, nullptr);
  EXPECT_EQ(fourth->id, 1000);  // at once, not after a flood job's seat time
  queue.Charge(*seated[0], 1.0, gpu);
  queue.Charge(*fourth, 1.0, gpu);
  EXPECT_EQ(queue.Pop(gpu)->share.tenant, "flood");  // two free: the flood takes one
}

TEST(AdmissionQueue, WithoutKeysAGpuKeepsNoSpareSeat) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(512, expired.Callback());
  const AdmissionQueue<TestJob>::SeatGroup gpu{"gpu0", 4, true};
  for (int id = 0; id < 10; ++id)
    ASSERT_TRUE(queue.Push(MakeJob(id)));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(queue.Pop(gpu)->id, i);
}

// A CPU's seats are the shared resource: weights share them.
TEST(AdmissionQueue, ACpusSeatsFollowTheWeightsAndKeepNoSpare) {
  ExpiredLog expired;
  AdmissionQueue<TestJob> queue(512, expired.Callback());
  const AdmissionQueue<TestJob>::SeatGroup cpu{"cpu", 4, false};
  for (int id = 0; id < 10; ++id)
    ASSERT_TRUE(queue.Push(MakeJob(id, 1h, "a")));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(queue.Pop(cpu)->id, i);
}

}  // namespace
}  // namespace kc::pool
