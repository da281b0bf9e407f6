// The system calls a sandboxed worker may not make (docs/sandbox.md).
//
// The filter allows by default and denies, with EPERM, what an evaluator's
// user code never needs and an attacker wants: ways out of the namespaces
// (mount, pivot_root, unshare, setns, namespace flags to clone), ways into
// other processes (ptrace, process_vm_*), the kernel's largest attack
// surfaces for unprivileged code (bpf, userfaultfd, io_uring, perf events,
// keyrings) and what needs privileges anyway (modules, kexec, reboot, clocks,
// swap, quotas, accounting). clone3 gets ENOSYS: its flags sit behind a
// pointer the filter cannot read, and glibc then falls back to clone, whose
// flags it can. kDeniedSyscalls in seccomp_filter.cc lists each with its reason.
#pragma once

#include "base/status.h"

namespace kc::worker {

// Compiles the filter to BPF once per process (libseccomp takes about 0.5 ms
// per worker): the zygote compiles it before it forks, so that its workers
// only load it.
Status CompileSeccompFilter();

// Loads the filter into this thread and its future children (after
// no_new_privs). Irreversible.
Status InstallSeccompFilter();

}  // namespace kc::worker
