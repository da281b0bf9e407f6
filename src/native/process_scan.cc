#include "native/process_scan.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/proc_stat.h"

namespace kc::native {
namespace {

std::optional<int> ParsePid(std::string_view text) {
  std::optional<int> id = ParseProcId(text);
  return id && *id > 0 ? id : std::nullopt;
}

std::optional<std::string> ReadLink(const std::string& path) {
  char target[4096];
  ssize_t n = readlink(path.c_str(), target, sizeof target);
  if (n < 0) return std::nullopt;
  return std::string(target, static_cast<size_t>(n));
}

// A comm is whatever bytes the process named itself (prctl PR_SET_NAME): bytes outside
// printable ASCII become \xNN, so the scan is valid UTF-8 and JSON.
std::string PrintableComm(std::string_view comm) {
  std::string out;
  for (unsigned char c : comm) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  return out;
}

// Fills holds_gpu from the process's descriptor links. A descriptor closed meanwhile (ENOENT)
// is skipped; any other unreadable link leaves the answer unknown unless another one is a GPU.
// Returns false when the process is gone.
bool ReadDescriptors(const std::string& proc_dir, OtherProcess& process) {
  std::string fd_dir = proc_dir + "/fd";
  DIR* dir = opendir(fd_dir.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return false;
    process.fd_error = fd_dir + ": " + std::strerror(errno);
    return true;
  }
  bool gpu = false;
  std::string unreadable;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::string link = fd_dir + "/" + entry->d_name;
    std::optional<std::string> target = ReadLink(link);
    if (!target) {
      if (errno != ENOENT && unreadable.empty()) unreadable = link + ": " + std::strerror(errno);
      continue;
    }
    if (IsNvidiaDevicePath(*target)) {
      gpu = true;
      break;
    }
  }
  closedir(dir);
  if (gpu || unreadable.empty()) {
    process.holds_gpu = gpu;
  } else {
    process.fd_error = unreadable;
  }
  return true;
}

}  // namespace

bool IsNvidiaDevicePath(std::string_view link_target) {
  return link_target.starts_with("/dev/nvidia");
}

std::optional<std::string> WhyScanIsNotMeaningful(int pid, int ppid, std::string_view proc_self) {
  if (pid != 2) {
    return "this process is pid " + std::to_string(pid) +
           ", not pid 2 of a sandboxed worker's PID namespace: the worker is not sandboxed, and "
           "its helpers cannot be told apart from the host's processes";
  }
  if (ppid != 0) {
    return "pid 2 whose parent is pid " + std::to_string(ppid) +
           " of its namespace, not the zygote outside it";
  }
  if (proc_self != "2") {
    return "/proc is not of this PID namespace (/proc/self is '" + std::string(proc_self) + "')";
  }
  return std::nullopt;
}

std::vector<OtherProcess> ListOtherProcesses(const std::string& proc_root, int self_pid) {
  std::vector<OtherProcess> processes;
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return processes;
  while (dirent* entry = readdir(dir)) {
    std::optional<int> pid = ParsePid(entry->d_name);
    if (!pid || *pid == 1 || *pid == self_pid) continue;
    std::string proc_dir = proc_root + "/" + entry->d_name;
    StatusOr<ProcStat> stat = ReadProcStat(proc_dir);
    if (stat.status().code() == StatusCode::kNotFound) continue;  // exited since readdir
    OtherProcess process;
    process.pid = *pid;
    if (stat.ok()) {
      process.comm = PrintableComm(stat->comm);
      process.state = stat->state;
      process.ppid = stat->ppid;
    }
    if (ReadDescriptors(proc_dir, process)) processes.push_back(std::move(process));
  }
  closedir(dir);
  std::sort(processes.begin(), processes.end(),
            [](const OtherProcess& a, const OtherProcess& b) { return a.pid < b.pid; });
  return processes;
}

ProcessScan ScanNamespaceProcesses() {
  ProcessScan scan;
  std::optional<std::string> proc_self = ReadLink("/proc/self");
  std::optional<std::string> why = WhyScanIsNotMeaningful(
      static_cast<int>(getpid()), static_cast<int>(getppid()), proc_self.value_or("unreadable"));
  if (why) {
    scan.reason_if_not = std::move(*why);
    return scan;
  }
  scan.meaningful = true;
  scan.processes = ListOtherProcesses("/proc", 2);
  return scan;
}

nlohmann::json ToJson(const ProcessScan& scan) {
  nlohmann::json processes = nlohmann::json::array();
  for (const OtherProcess& process : scan.processes) {
    nlohmann::json entry = {{"pid", process.pid},
                            {"ppid", process.ppid},
                            {"state", std::string(1, process.state)},
                            {"comm", process.comm},
                            {"holds_gpu", nullptr}};
    if (process.holds_gpu) {
      entry["holds_gpu"] = *process.holds_gpu;
    } else {
      entry["fd_error"] = process.fd_error;
    }
    processes.push_back(std::move(entry));
  }
  return {{"meaningful", scan.meaningful},
          {"reason_if_not",
           scan.meaningful ? nlohmann::json(nullptr) : nlohmann::json(scan.reason_if_not)},
          {"processes", std::move(processes)}};
}

}  // namespace kc::native
