#include "base/background_close.h"

#include <poll.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

namespace kc {
namespace {

// True once the pipe's write end is closed everywhere: its read end says end of file.
bool WriteEndClosed(int read_end, int timeout_ms) {
  pollfd readable{read_end, POLLIN, 0};
  if (::poll(&readable, 1, timeout_ms) != 1) return false;
  char byte;
  return ::read(read_end, &byte, 1) == 0;
}

TEST(BackgroundClose, ClosesTheDescriptorSoonAfter) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  UniqueFd read_end(ends[0]);
  CloseInBackground(UniqueFd(ends[1]));
  EXPECT_TRUE(WriteEndClosed(read_end.get(), 5000));
}

TEST(BackgroundClose, ClosesManyInTheOrderGiven) {
  std::vector<UniqueFd> read_ends;
  for (int i = 0; i < 64; ++i) {
    int ends[2];
    ASSERT_EQ(::pipe(ends), 0);
    read_ends.emplace_back(ends[0]);
    CloseInBackground(UniqueFd(ends[1]));
  }
  for (const UniqueFd& read_end : read_ends)
    EXPECT_TRUE(WriteEndClosed(read_end.get(), 5000));
}

TEST(BackgroundClose, AnEmptyDescriptorIsNothingToClose) {
  CloseInBackground(UniqueFd());  // no crash, no close(-1) queued
}

}  // namespace
}  // namespace kc
