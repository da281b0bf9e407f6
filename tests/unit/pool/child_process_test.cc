#include "pool/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "wait_until.h"

extern char** environ;

namespace kc::pool {
namespace {

using namespace std::chrono_literals;

using testing::WaitUntil;

SpawnOptions Shell(const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  for (char** e = environ; *e != nullptr; ++e)
    options.env.emplace_back(*e);
  return options;
}

// The state letter of /proc/<pid>/stat ('R', 'S', 'Z', ...), or 0 if gone.
char ProcState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return 0;
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return 0;
  return line[close + 2];
}

// Dead: gone from /proc, or a zombie waiting for its (new) parent.
bool Dead(pid_t pid) {
  const char state = ProcState(pid);
  return state == 0 || state == 'Z';
}

std::string Comm(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

TEST(ChildProcess, ReportsTheExitCodeOfAnExitedChild) {
  StatusOr<ChildProcess> child = ChildProcess::Spawn(Shell("exit 3"));
  ASSERT_TRUE(child.ok()) << child.status().message();
  const pid_t pid = child->pid();
  EXPECT_TRUE(child->running());
  EXPECT_EQ(child->exit_description(), "");
  ASSERT_TRUE(WaitUntil([&] { return ProcState(pid) == 'Z'; }));
  child->KillTreeAndReap();  // SIGSTOP/SIGKILL leave a zombie's status alone
  EXPECT_FALSE(child->running());
  EXPECT_EQ(child->exit_description(), "exit code 3");
  EXPECT_EQ(ProcState(pid), 0);  // reaped
  child->KillTreeAndReap();      // idempotent
  EXPECT_EQ(child->exit_description(), "exit code 3");
}

TEST(ChildProcess, KillingARunningChildReportsTheSignal) {
  StatusOr<ChildProcess> child = ChildProcess::Spawn(Shell("sleep 100"));
  ASSERT_TRUE(child.ok()) << child.status().message();
  child->KillTreeAndReap();
  EXPECT_EQ(child->exit_description(), "signal 9");
}

TEST(ChildProcess, LeadsItsOwnSession) {
  StatusOr<ChildProcess> child = ChildProcess::Spawn(Shell("sleep 100"));
  ASSERT_TRUE(child.ok()) << child.status().message();
  EXPECT_EQ(::getsid(child->pid()), child->pid());
}

TEST(ChildProcess, SpawnOfAMissingProgramFails) {
  SpawnOptions options = Shell("");
  options.argv = {"/nonexistent/kcoral-test-program"};
  StatusOr<ChildProcess> child = ChildProcess::Spawn(options);
  EXPECT_FALSE(child.ok());
}

TEST(ChildProcess, DestructorReapsTheGroup) {
  pid_t pid = -1;
  std::vector<pid_t> descendants;
  {
    StatusOr<ChildProcess> child = ChildProcess::Spawn(Shell("sleep 100 & sleep 100 & wait"));
    ASSERT_TRUE(child.ok()) << child.status().message();
    pid = child->pid();
    ASSERT_TRUE(WaitUntil([&] {
      descendants = Descendants(pid);
      return descendants.size() == 2;
    }));
  }
  EXPECT_TRUE(WaitUntil([&] { return ProcState(pid) == 0; }));  // our child: reaped by us
  for (pid_t p : descendants)
    EXPECT_TRUE(WaitUntil([&] { return Dead(p); })) << "descendant " << p << " survived";
}

TEST(ChildProcess, DescendantThatCallsSetsidIsKilled) {
  pid_t pid = -1;
  pid_t escaped = -1;
  {
    StatusOr<ChildProcess> child = ChildProcess::Spawn(Shell("setsid sleep 100 & wait"));
    ASSERT_TRUE(child.ok()) << child.status().message();
    pid = child->pid();
    ASSERT_TRUE(WaitUntil([&] {
      for (pid_t p : Descendants(pid)) {
        if (Comm(p) == "sleep") escaped = p;
      }
      return escaped > 0;
    }));
    EXPECT_EQ(::getsid(escaped), escaped);  // it left the child's session
  }
  EXPECT_TRUE(WaitUntil([&] { return ProcState(pid) == 0; }));
  EXPECT_TRUE(WaitUntil([&] { return Dead(escaped); })) << "setsid descendant survived";
}

TEST(ChildProcess, MovedFromObjectOwnsNothing) {
  StatusOr<ChildProcess> child = ChildProcess::Spawn(Shell("sleep 100"));
  ASSERT_TRUE(child.ok()) << child.status().message();
  const pid_t pid = child->pid();
  ChildProcess owner = std::move(*child);
  EXPECT_FALSE(child->running());
  EXPECT_EQ(owner.pid(), pid);
  child->KillTreeAndReap();  // a no-op: the process is not its own any more
  EXPECT_NE(ProcState(pid), 'Z');
  EXPECT_NE(ProcState(pid), 0);
  owner.KillTreeAndReap();
  EXPECT_EQ(owner.exit_description(), "signal 9");
  EXPECT_EQ(ProcState(pid), 0);
}

TEST(ChildProcess, AdoptedProcessIsKilledButLeftToItsParent) {
  StatusOr<ChildProcess> parent_view = ChildProcess::Spawn(Shell("sleep 100"));
  ASSERT_TRUE(parent_view.ok()) << parent_view.status().message();
  const pid_t pid = parent_view->pid();
  ChildProcess adopted = ChildProcess::Adopt(pid);
  EXPECT_TRUE(adopted.running());
  adopted.KillTreeAndReap();
  EXPECT_FALSE(adopted.running());
  EXPECT_EQ(adopted.exit_description(), "killed");
  EXPECT_TRUE(WaitUntil([&] { return ProcState(pid) == 'Z'; }));  // not reaped by the adopter
  parent_view->KillTreeAndReap();                                 // the real parent reaps it
  EXPECT_EQ(parent_view->exit_description(), "signal 9");
  EXPECT_EQ(ProcState(pid), 0);
}

TEST(ChildProcess, FdMapPlacesADescriptorInTheChild) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  SpawnOptions options = Shell("echo hi >&3");
  options.fd_map = {{fds[1], 3}};
  StatusOr<ChildProcess> child = ChildProcess::Spawn(options);
  ::close(fds[1]);
  ASSERT_TRUE(child.ok()) << child.status().message();

  std::string received;
  char buffer[64];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << std::strerror(errno);
    received.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  EXPECT_EQ(received, "hi\n");
  ASSERT_TRUE(WaitUntil([&] { return ProcState(child->pid()) == 'Z'; }));
  child->KillTreeAndReap();
  EXPECT_EQ(child->exit_description(), "exit code 0");
}

}  // namespace
}  // namespace kc::pool
