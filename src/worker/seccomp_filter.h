// The system calls a sandboxed worker may not make (DESIGN.md "Sandbox").
//
// The filter allows by default and denies, with EPERM, what an evaluator's
// user code never needs and an attacker wants: ways out of the namespaces
// (mount, pivot_root, unshare, setns, namespace flags to clone), ways into
// other processes (ptrace, process_vm_*), the kernel's largest attack
// surfaces for unprivileged code (bpf, userfaultfd, io_uring, perf events,
// keyrings) and what needs privileges anyway (modules, kexec, reboot, clocks,
// swap, quotas, accounting). clone3 gets ENOSYS: its flags sit behind a
// pointer the filter cannot read, and glibc then falls back to clone, whose
// flags it can. kDeniedSyscalls lists each with its reason.
#pragma once

#include <string_view>

#include "base/status.h"

namespace kc::worker {

struct DeniedSyscall {
  std::string_view name;
  std::string_view why;
};

extern const DeniedSyscall kDeniedSyscalls[];
extern const size_t kDeniedSyscallCount;

// Loads the filter into this thread and its future children (after
// no_new_privs). Irreversible.
Status InstallSeccompFilter();

}  // namespace kc::worker
