#include "pool/gpu_census.h"

#include <map>

#include <gtest/gtest.h>

namespace kc::pool {
namespace {

// server 100 -> zygote 110 -> sandbox init 120 -> worker 121 (timed); 130 -> 131 (a stand-by);
// 500 and 600: someone else's; 700 is listed by NVML but not in /proc.
ProcStat Proc(int pid, int ppid, const char* comm) {
  return {.pid = pid, .comm = comm, .ppid = ppid};
}

const std::map<int, ProcStat> kTree = {
    {100, Proc(100, 1, "kcoral-server")}, {110, Proc(110, 100, "python3")},
    {120, Proc(120, 110, "kcoral-init")}, {121, Proc(121, 120, "python3")},
    {130, Proc(130, 110, "kcoral-init")}, {131, Proc(131, 130, "python3")},
    {500, Proc(500, 1, "python3")},       {600, Proc(600, 500, "bench")}};

std::optional<ProcStat> Lookup(int pid) {
  auto it = kTree.find(pid);
  if (it == kTree.end()) return std::nullopt;
  return it->second;
}

TEST(GpuCensus, TheServersOwnProcessesAreNotForeign) {
  const auto reading = Classify({121, 131}, 120, 100, Lookup);
  EXPECT_TRUE(reading.meaningful);
  EXPECT_TRUE(reading.foreign.empty());
}

TEST(GpuCensus, OthersAreForeignWithTheirNames) {
  const auto reading = Classify({121, 600, 700}, 120, 100, Lookup);
  ASSERT_TRUE(reading.meaningful);
  ASSERT_EQ(reading.foreign.size(), 2u);
  EXPECT_EQ(reading.foreign[0].pid, 600);
  EXPECT_EQ(reading.foreign[0].name, "bench");
  EXPECT_EQ(reading.foreign[1].pid, 700);
  EXPECT_EQ(reading.foreign[1].name, "(not in the server's PID namespace)");
}

TEST(GpuCensus, WithoutTheTimedWorkerListedItCannotTellAnyoneApart) {
  // PIDs of another namespace: nobody listed is known, not even the timed worker.
  const auto reading = Classify({9121, 9131}, 120, 100, Lookup);
  EXPECT_FALSE(reading.meaningful);
  EXPECT_NE(reading.reason_if_not.find("another PID namespace"), std::string::npos);
  EXPECT_TRUE(reading.foreign.empty());
}

}  // namespace
}  // namespace kc::pool
