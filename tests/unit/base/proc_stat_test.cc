#include "base/proc_stat.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace kc {
namespace {

TEST(ParseProcStat, ReadsIdsStateAndComm) {
  StatusOr<ProcStat> stat = ParseProcStat("42 (python3) S 2 42 1 0 -1 4194560 ...\n");
  ASSERT_TRUE(stat.ok()) << stat.status().message();
  EXPECT_EQ(stat->pid, 42);
  EXPECT_EQ(stat->comm, "python3");
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->ppid, 2);
}

TEST(ParseProcStat, CommMayHoldSpacesAndParentheses) {
  StatusOr<ProcStat> stat = ParseProcStat("7 (a) b (c)) Z 1 7 7 0");
  ASSERT_TRUE(stat.ok()) << stat.status().message();
  EXPECT_EQ(stat->comm, "a) b (c)");
  EXPECT_EQ(stat->state, 'Z');
  EXPECT_EQ(stat->ppid, 1);
}

TEST(ParseProcStat, KernelStartedProcessesHaveParentZero) {
  StatusOr<ProcStat> stat = ParseProcStat("1 (init) S 0 1 1 0");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->ppid, 0);
}

TEST(ParseProcStat, MalformedLinesAreInvalidArgument) {
  for (const char* text : {"", "42", "42 (x", "42 (x)", "42 (x) S", "x (y) S 1 ", "42 (x) S -1 "}) {
    EXPECT_EQ(ParseProcStat(text).status().code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST(ReadProcStat, ReadsThisProcess) {
  StatusOr<ProcStat> stat = ReadProcStat("/proc/" + std::to_string(getpid()));
  ASSERT_TRUE(stat.ok()) << stat.status().message();
  EXPECT_EQ(stat->pid, getpid());
  EXPECT_EQ(stat->ppid, getppid());
  EXPECT_FALSE(stat->comm.empty());
}

TEST(ReadProcStat, AnExitedProcessIsNotFound) {
  EXPECT_EQ(ReadProcStat("/proc/-5").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kc
