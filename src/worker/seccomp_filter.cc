#include "worker/seccomp_filter.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "base/memfd.h"
#include "base/unique_fd.h"

namespace kc::worker {

namespace {

struct DeniedSyscall {
  std::string_view name;
  std::string_view why;  // the reason, for the reader: never needed at run time
};

constexpr DeniedSyscall kDeniedSyscalls[] = {
    {"ptrace", "reads and writes other processes"},
    {"process_vm_readv", "reads another process's memory"},
    {"process_vm_writev", "writes another process's memory"},
    {"kcmp", "probes other processes' kernel objects"},
    {"mount", "changes the view"},
    {"umount2", "uncovers what the view hides"},
    {"pivot_root", "changes the root"},
    {"chroot", "changes the root"},
    {"move_mount", "new mount API"},
    {"open_tree", "new mount API"},
    {"fsopen", "new mount API"},
    {"fsmount", "new mount API"},
    {"fsconfig", "new mount API"},
    {"fspick", "new mount API"},
    {"mount_setattr", "new mount API"},
    {"unshare", "new namespaces (user namespaces bring capabilities back)"},
    {"setns", "joins other namespaces"},
    {"open_by_handle_at", "opens files outside the view by handle"},
    {"name_to_handle_at", "pairs with open_by_handle_at"},
    {"bpf", "kernel attack surface"},
    {"userfaultfd", "kernel attack surface (stalls the kernel on a fault)"},
    {"io_uring_setup", "kernel attack surface, bypasses this filter"},
    {"io_uring_enter", "kernel attack surface"},
    {"io_uring_register", "kernel attack surface"},
    {"perf_event_open", "kernel attack surface, side channels"},
    {"keyctl", "kernel keyrings are not namespaced"},
    {"add_key", "kernel keyrings are not namespaced"},
    {"request_key", "kernel keyrings are not namespaced"},
    {"init_module", "loads kernel code"},
    {"finit_module", "loads kernel code"},
    {"delete_module", "unloads kernel code"},
    {"kexec_load", "replaces the kernel"},
    {"kexec_file_load", "replaces the kernel"},
    {"reboot", "stops the host"},
    {"swapon", "host memory"},
    {"swapoff", "host memory"},
    {"syslog", "reads the kernel log"},
    {"acct", "host accounting"},
    {"quotactl", "host quotas"},
    {"settimeofday", "host clock"},
    {"clock_settime", "host clock"},
    {"clock_adjtime", "host clock"},
    {"adjtimex", "host clock"},
    {"iopl", "raw port access"},
    {"ioperm", "raw port access"},
    {"lookup_dcookie", "kernel internals"},
    {"fanotify_init", "watches the file system"},
    {"vhangup", "terminal control"},
};

// Namespace flags that clone may not carry (0x80 is CLONE_NEWTIME, missing
// from older headers).
constexpr uint64_t kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
                                        CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, 0x80};

struct FilterContext {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  ~FilterContext() {
    if (ctx != nullptr) seccomp_release(ctx);
  }
};

Status Failed(const std::string& step, int rc) {
  return FailedPreconditionError("seccomp: " + step + ": " + std::strerror(-rc));
}

StatusOr<std::string> BuildFilter() {
  FilterContext filter;
  if (filter.ctx == nullptr) return FailedPreconditionError("seccomp: cannot create a filter");
  for (const DeniedSyscall& denied : kDeniedSyscalls) {
    const int number = seccomp_syscall_resolve_name(std::string(denied.name).c_str());
    if (number == __NR_SCMP_ERROR) continue;  // not a system call on this architecture
    if (int rc = seccomp_rule_add(filter.ctx, SCMP_ACT_ERRNO(EPERM), number, 0); rc != 0)
      return Failed("deny " + std::string(denied.name), rc);
  }
  if (int rc = seccomp_rule_add(filter.ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc != 0)
    return Failed("clone3", rc);
  for (uint64_t flag :
       kNamespaceFlags) {  // one rule per flag: a rule matches (arg & mask) == value
    if (int rc = seccomp_rule_add(filter.ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        rc != 0) {
      return Failed("clone", rc);
    }
  }
  KC_ASSIGN_OR_RETURN(UniqueFd program, MakeMemfd("kcoral-seccomp"));
  if (int rc = seccomp_export_bpf(filter.ctx, program.get()); rc != 0) return Failed("export", rc);
  if (::lseek(program.get(), 0, SEEK_SET) != 0) return FailedPreconditionError("seccomp: rewind");
  KC_ASSIGN_OR_RETURN(std::string bpf, ReadWholeFd(program.get()));
  if (bpf.empty() || bpf.size() % sizeof(sock_filter) != 0)
    return FailedPreconditionError("seccomp: exported a malformed program");
  return bpf;
}

std::optional<StatusOr<std::string>>& Compiled() {
  static std::optional<StatusOr<std::string>> compiled;
  return compiled;
}

}  // namespace

Status CompileSeccompFilter() {
  if (!Compiled()) Compiled() = BuildFilter();
  return Compiled()->status();
}

Status InstallSeccompFilter() {
  KC_RETURN_IF_ERROR(CompileSeccompFilter());
  std::string& bpf = **Compiled();
  sock_fprog program{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                     reinterpret_cast<sock_filter*>(bpf.data())};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0)
    return FailedPreconditionError(std::string("seccomp: load: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace kc::worker
