#include "native/process_scan.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "../temp_dir.h"

namespace kc::native {
namespace {

namespace fs = std::filesystem;

TEST(IsNvidiaDevicePath, MatchesWhatCudaOpens) {
  for (const char* path : {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm",
                           "/dev/nvidia-uvm-tools", "/dev/nvidia-caps/nvidia-cap1"}) {
    EXPECT_TRUE(IsNvidiaDevicePath(path)) << path;
  }
  for (const char* path : {"/dev/null", "socket:[1234]", "/tmp/dev/nvidia0", "anon_inode:[x]"}) {
    EXPECT_FALSE(IsNvidiaDevicePath(path)) << path;
  }
}

TEST(WhyScanIsNotMeaningful, OnlyPidTwoWithItsParentOutsideAndItsOwnProc) {
  EXPECT_FALSE(WhyScanIsNotMeaningful(2, 0, "2").has_value());
  EXPECT_NE(WhyScanIsNotMeaningful(1234, 1, "1234")->find("not sandboxed"), std::string::npos);
  EXPECT_NE(WhyScanIsNotMeaningful(2, 7, "2")->find("parent is pid 7"), std::string::npos);
  // pid 2 of a namespace whose /proc is the host's: the listing would be the host's.
  EXPECT_NE(WhyScanIsNotMeaningful(2, 0, "81234")->find("/proc is not"), std::string::npos);
}

// A fake /proc: directories named by pid with a stat file and an fd directory of links.
class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(root_.empty()) << "mkdtemp failed"; }

  fs::path AddProcess(int pid, const std::string& comm, int ppid) {
    fs::path dir = root_ / std::to_string(pid);
    fs::create_directories(dir / "fd");
    std::ofstream(dir / "stat") << pid << " (" << comm << ") S " << ppid << " 0 0 0\n";
    return dir;
  }
  void AddFd(const fs::path& dir, int fd, const std::string& target) {
    fs::create_symlink(target, dir / "fd" / std::to_string(fd));
  }

  kc::testing::TempDir temp_;
  const fs::path& root_ = temp_.path();
};

TEST_F(FakeProc, ListsOthersButPidOneAndSelfInPidOrder) {
  AddProcess(1, "python3", 0);
  AddProcess(2, "python3", 1);
  fs::path helper = AddProcess(17, "helper", 2);
  AddFd(helper, 0, "/dev/null");
  AddFd(helper, 5, "/dev/nvidia0");
  fs::path idle = AddProcess(9, "sleep", 2);
  AddFd(idle, 0, "/dev/null");
  AddFd(idle, 1, "pipe:[77]");
  fs::create_directories(root_ / "self");  // not a pid
  std::ofstream(root_ / "uptime") << "1.0 1.0\n";

  std::vector<OtherProcess> processes = ListOtherProcesses(root_.string(), 2);
  ASSERT_EQ(processes.size(), 2u);
  EXPECT_EQ(processes[0].pid, 9);
  EXPECT_EQ(processes[0].comm, "sleep");
  EXPECT_EQ(processes[0].holds_gpu, std::optional<bool>(false));
  EXPECT_EQ(processes[1].pid, 17);
  EXPECT_EQ(processes[1].ppid, 2);
  EXPECT_EQ(processes[1].state, 'S');
  EXPECT_EQ(processes[1].holds_gpu, std::optional<bool>(true));
}

TEST_F(FakeProc, UnreadableDescriptorsMakeTheAnswerUnknown) {
  fs::path hidden = AddProcess(30, "hidden", 2);
  fs::remove(hidden / "fd");
  std::ofstream(hidden / "fd") << "";  // not a directory: opendir fails (ENOTDIR)
  fs::path odd = AddProcess(31, "odd", 2);
  std::ofstream(odd / "fd" / "3") << "";  // not a link: readlink fails (EINVAL)
  fs::path gpu = AddProcess(32, "gpu", 2);
  std::ofstream(gpu / "fd" / "3") << "";
  AddFd(gpu, 4, "/dev/nvidiactl");  // one GPU link is enough, whatever else is unreadable

  std::vector<OtherProcess> processes = ListOtherProcesses(root_.string(), 2);
  ASSERT_EQ(processes.size(), 3u);
  EXPECT_FALSE(processes[0].holds_gpu.has_value());
  EXPECT_NE(processes[0].fd_error.find("/30/fd"), std::string::npos) << processes[0].fd_error;
  EXPECT_FALSE(processes[1].holds_gpu.has_value());
  EXPECT_NE(processes[1].fd_error.find("/31/fd/3"), std::string::npos) << processes[1].fd_error;
  EXPECT_EQ(processes[2].holds_gpu, std::optional<bool>(true));
}

TEST_F(FakeProc, ProcessesThatExitDuringTheWalkAreLeftOut) {
  fs::path gone = AddProcess(40, "gone", 2);
  fs::remove_all(gone / "fd");           // stat read, then the fd directory vanished
  fs::create_directories(root_ / "41");  // no stat at all
  EXPECT_TRUE(ListOtherProcesses(root_.string(), 2).empty());
}

TEST_F(FakeProc, NonPrintableCommIsEscaped) {
  AddProcess(50, std::string("a\xff\tb\\"), 2);
  std::vector<OtherProcess> processes = ListOtherProcesses(root_.string(), 2);
  ASSERT_EQ(processes.size(), 1u);
  EXPECT_EQ(processes[0].comm, "a\\xff\\x09b\\x5c");
  EXPECT_NO_THROW(ToJson(ProcessScan{true, "", processes}).dump());
}

TEST(ProcessScanJson, KeysAndNulls) {
  ProcessScan scan;
  scan.meaningful = true;
  scan.processes.push_back({17, 2, 'S', "helper", true, ""});
  scan.processes.push_back({18, 2, 'R', "hidden", std::nullopt, "/proc/18/fd: Permission denied"});
  nlohmann::json json = ToJson(scan);
  EXPECT_EQ(json["meaningful"], true);
  EXPECT_TRUE(json["reason_if_not"].is_null());
  ASSERT_EQ(json["processes"].size(), 2u);
  EXPECT_EQ(
      json["processes"][0],
      (nlohmann::json{
          {"pid", 17}, {"ppid", 2}, {"state", "S"}, {"comm", "helper"}, {"holds_gpu", true}}));
  EXPECT_TRUE(json["processes"][1]["holds_gpu"].is_null());
  EXPECT_EQ(json["processes"][1]["fd_error"], "/proc/18/fd: Permission denied");

  ProcessScan not_meaningful{false, "this process is pid 7", {}};
  EXPECT_EQ(ToJson(not_meaningful)["reason_if_not"], "this process is pid 7");
}

TEST(ScanNamespaceProcesses, OutsideASandboxSaysWhy) {
  if (getpid() == 2) GTEST_SKIP() << "running as pid 2 of a PID namespace";
  ProcessScan scan = ScanNamespaceProcesses();
  EXPECT_FALSE(scan.meaningful);
  EXPECT_TRUE(scan.processes.empty());
  EXPECT_NE(scan.reason_if_not.find("not pid 2"), std::string::npos) << scan.reason_if_not;
}

}  // namespace
}  // namespace kc::native
