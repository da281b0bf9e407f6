// ScanNamespaceProcesses: the other processes in a sandboxed worker's PID namespace, and whether
// each holds a GPU device open: the helper-process side channel of issue 9 (work done in a
// helper process, for one through CUDA IPC, is outside the timed process's CUPTI records).
//
// A sandboxed worker runs as pid 2 of its own PID namespace beside a reaper at pid 1, both
// children of the zygote outside it (docs/sandbox.md, worker/namespace_init.h), with a /proc of
// that namespace. So every process
// /proc lists besides those two was started by user code. Elsewhere (--sandbox none, a plain
// process) /proc is the host's and the scan says it is not meaningful instead of listing it.
//
// Cheap: one /proc walk, a readlink per open descriptor of each other process (none, normally).
// /proc lists thread-group leaders only, so the worker's own threads never appear.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::native {

struct OtherProcess {
  int pid = 0;
  int ppid = 0;
  char state = '?';  // from /proc/<pid>/stat: R, S, D, Z, ...
  std::string comm;  // printable ASCII; other bytes as \xNN
  // Whether a descriptor links to /dev/nvidia*; nullopt when its descriptors could not be read
  // (EACCES: a process that made itself non-dumpable), with the reason in fd_error. Treat an
  // unknown as suspect: an honest helper has no reason to hide.
  std::optional<bool> holds_gpu;
  std::string fd_error;
};

struct ProcessScan {
  bool meaningful = false;
  std::string reason_if_not;  // set when !meaningful
  std::vector<OtherProcess> processes;
};

ProcessScan ScanNamespaceProcesses();

// {"meaningful": bool, "reason_if_not": str | null, "processes": [{"pid", "ppid", "state",
// "comm", "holds_gpu": bool | null, "fd_error" (only when holds_gpu is null)}]}
nlohmann::json ToJson(const ProcessScan& scan);

// The pieces, for tests.

// /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-caps/...: what CUDA opens.
bool IsNvidiaDevicePath(std::string_view link_target);

// Why a scan in a process with these ids and this /proc/self link cannot be trusted to list the
// request's processes; nullopt when it can (pid 2, its parent outside the namespace: 0, /proc of
// our own namespace).
std::optional<std::string> WhyScanIsNotMeaningful(int pid, int ppid, std::string_view proc_self);

// Every process under `proc_root` ("/proc" or a test's fake tree) but pid 1 and `self_pid`,
// ordered by pid. Processes that exit during the walk are left out.
std::vector<OtherProcess> ListOtherProcesses(const std::string& proc_root, int self_pid);

}  // namespace kc::native
