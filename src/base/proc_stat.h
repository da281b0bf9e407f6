// ProcStat: what KCoral reads of /proc/<pid>/stat (id, name, state, parent), for the worker's
// scan of its PID namespace (native/process_scan.h) and the server's census of a GPU's
// processes (pool/gpu_census.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kc {

struct ProcStat {
  int pid = 0;
  std::string comm;
  char state = '?';
  int ppid = 0;
};

// A whole decimal number >= 0 ("0" is the parent id of processes the kernel starts).
std::optional<int> ParseProcId(std::string_view text);

// Parses /proc/<pid>/stat: "pid (comm) state ppid ...". The comm may hold spaces and ')',
// so it ends at the last ')'. kInvalidArgument for a malformed line.
StatusOr<ProcStat> ParseProcStat(std::string_view text);

// Reads and parses `proc_dir`/stat ("/proc/42"): kNotFound when it cannot be read (the
// process has exited), else as ParseProcStat.
StatusOr<ProcStat> ReadProcStat(const std::string& proc_dir);

}  // namespace kc
