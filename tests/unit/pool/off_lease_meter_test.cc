#include "pool/off_lease_meter.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace kc::pool {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kStart = 1'000 * kSecond;
constexpr int kWorker = 100, kNeighbour = 200;

bool Ours(int pid) {
  return pid == kWorker;
}

// Samples every 200 ms of `pid` at `percent`, ending in (from, to].
std::vector<GpuUseSample> Every200ms(int pid, int64_t from, int64_t to, int percent) {
  std::vector<GpuUseSample> samples;
  for (int64_t end = from + 200'000; end <= to; end += 200'000)
    samples.push_back({pid, end, percent});
  return samples;
}

TEST(OffLeaseMeter, WorkUnderTheLeaseCountsNothing) {
  OffLeaseMeter meter(kStart);
  meter.Acquired(kStart + kSecond);
  meter.Add(Every200ms(kWorker, kStart + kSecond, kStart + 5 * kSecond, 100), Ours);
  meter.Released(kStart + 5 * kSecond);
  EXPECT_EQ(meter.seconds(), 0);
}

// The engine drains at a release: a busy sample ending up to kGrace after it is the lease's.
TEST(OffLeaseMeter, SamplesOverlappingATenureAreTheLeases) {
  OffLeaseMeter meter(kStart);
  meter.Acquired(kStart + kSecond);
  meter.Released(kStart + 3 * kSecond);
  meter.Add(Every200ms(kWorker, kStart + 2 * kSecond, kStart + 5 * kSecond, 100), Ours);
  EXPECT_EQ(meter.seconds(), 0);
}

TEST(OffLeaseMeter, BusySamplesAfterARelease) {
  OffLeaseMeter meter(kStart);
  meter.Acquired(kStart + kSecond);
  meter.Released(kStart + 2 * kSecond);
  // Busy from the release to 7 s: counted from 4 s on (the grace).
  meter.Add(Every200ms(kWorker, kStart + 2 * kSecond, kStart + 7 * kSecond, 100), Ours);
  EXPECT_NEAR(meter.seconds(), 3.0, 0.21);
  EXPECT_EQ(meter.last_pid(), kWorker);
}

TEST(OffLeaseMeter, ScaledByUtilizationAndTheGapSinceTheLastSample) {
  OffLeaseMeter meter(kStart);
  // Reads that saw every other sample: each stands for 400 ms at 50%.
  std::vector<GpuUseSample> samples;
  for (int64_t end = kStart + 3 * kSecond; end <= kStart + 5 * kSecond; end += 400'000)
    samples.push_back({kWorker, end, 50});
  meter.Add(samples, Ours);
  EXPECT_NEAR(meter.seconds(), 0.1 + 5 * 0.2, 1e-9);  // first: 200 ms at 50%
}

TEST(OffLeaseMeter, OtherProcessesAndIdleSamplesCountNothing) {
  OffLeaseMeter meter(kStart);
  int asked = 0;
  auto ours = [&](int pid) { return ++asked, pid == kWorker; };
  meter.Add(Every200ms(kNeighbour, kStart + 3 * kSecond, kStart + 5 * kSecond, 100), ours);
  meter.Add(Every200ms(kWorker, kStart + 3 * kSecond, kStart + 5 * kSecond, 0), ours);
  EXPECT_EQ(meter.seconds(), 0);
  EXPECT_EQ(asked, 10);  // asked of the busy neighbour's samples only
}

TEST(OffLeaseMeter, SamplesReadTwiceCountOnce) {
  OffLeaseMeter meter(kStart);
  const auto samples = Every200ms(kWorker, kStart + 3 * kSecond, kStart + 4 * kSecond, 100);
  meter.Add(samples, Ours);
  const double once = meter.seconds();
  EXPECT_GT(once, 0);
  meter.Add(samples, Ours);
  EXPECT_EQ(meter.seconds(), once);
  EXPECT_EQ(meter.read_after_us(), kStart + 3 * kSecond);  // the newest, less kMaxPeriod
}

// A stand-by's warm-up kernels, sampled before the run began, are not the run's.
TEST(OffLeaseMeter, SamplesBeforeTheRunCountNothing) {
  OffLeaseMeter meter(kStart);
  meter.Add(Every200ms(kWorker, kStart - 2 * kSecond, kStart + 1'800'000, 100), Ours);
  EXPECT_EQ(meter.seconds(), 0);
}

// A gap longer than a period (a process idle between samples) counts one period at most.
TEST(OffLeaseMeter, AGapCountsAtMostOnePeriod) {
  OffLeaseMeter meter(kStart);
  meter.Add({{kWorker, kStart + 3 * kSecond, 100}, {kWorker, kStart + 9 * kSecond, 100}}, Ours);
  EXPECT_NEAR(meter.seconds(), 0.2 + 1.0, 1e-9);
}

TEST(InProcessTree, TheProcessItselfAndItsChildren) {
  EXPECT_TRUE(InProcessTree(::getpid(), ::getpid()));
  EXPECT_TRUE(InProcessTree(::getpid(), ::getppid()));
  EXPECT_FALSE(InProcessTree(::getppid(), ::getpid()));
}

}  // namespace
}  // namespace kc::pool
