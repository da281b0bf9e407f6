#include "worker/namespace_init.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace kc::worker {

namespace {

constexpr size_t kStackBytes = 64 * 1024;

// A system call without libc: no errno written (it would be the zygote's).
long RawSyscall(long number, long a = 0, long b = 0, long c = 0, long d = 0) {
#if defined(__x86_64__)
  long result;
  register long r10 asm("r10") = d;
  asm volatile("syscall"
               : "=a"(result)
               : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10)
               : "rcx", "r11", "memory");
  return result;
#elif defined(__aarch64__)
  register long x8 asm("x8") = number;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  register long x3 asm("x3") = d;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
  return x0;
#else
#error "namespace_init: raw system calls are written for x86_64 and aarch64 only"
#endif
}

int InitMain(void* zygote_pidfd) {
  // Dies with the zygote, and the namespace with it. PDEATHSIG only covers a
  // zygote that dies from here on, so a zygote already gone (killed between
  // the clone and this line; its pidfd is then readable) means exit now:
  // otherwise this init would reap an empty namespace forever.
  RawSyscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
  struct pollfd zygote = {static_cast<int>(reinterpret_cast<intptr_t>(zygote_pidfd)), POLLIN, 0};
  const struct timespec now = {0, 0};
  if (RawSyscall(SYS_ppoll, reinterpret_cast<long>(&zygote), 1, reinterpret_cast<long>(&now)) !=
      0) {
    RawSyscall(SYS_exit_group, 0);
  }
  RawSyscall(SYS_prctl, PR_SET_NAME, reinterpret_cast<long>("kcoral-init"));
  RawSyscall(SYS_close_range, 0, ~0u, 0);
  const unsigned long sigchld = 1ul << (SIGCHLD - 1);  // the kernel's sigset_t
  for (;;) {
    while (RawSyscall(SYS_wait4, -1, 0, WNOHANG | __WALL, 0) > 0) {
    }
    RawSyscall(SYS_rt_sigtimedwait, reinterpret_cast<long>(&sigchld), 0, 0, sizeof sigchld);
  }
}

std::mutex g_mu;
std::map<pid_t, void*> g_stacks;  // init pid -> its stack, until reaped

}  // namespace

StatusOr<pid_t> StartNamespaceInit() {
  void* stack = ::mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    return FailedPreconditionError(std::string("pid namespace: init stack: ") +
                                   std::strerror(errno));
  // The init's only way to tell that the zygote died before it could ask for
  // PDEATHSIG (InitMain); its copy of the descriptor is closed there.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
  if (pidfd < 0) {
    const int pidfd_errno = errno;
    ::munmap(stack, kStackBytes);
    return FailedPreconditionError(std::string("pid namespace: pidfd_open: ") +
                                   std::strerror(pidfd_errno));
  }
  // Born with every signal blocked: the handlers it inherits are the
  // zygote's and must never run on its stack.
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::clone(InitMain, static_cast<char*>(stack) + kStackBytes, CLONE_VM | SIGCHLD,
                            reinterpret_cast<void*>(static_cast<intptr_t>(pidfd)));
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::close(pidfd);
  if (pid < 0) {
    ::munmap(stack, kStackBytes);
    return FailedPreconditionError(std::string("pid namespace: start its init: ") +
                                   std::strerror(clone_errno));
  }
  std::lock_guard lock(g_mu);
  g_stacks[pid] = stack;
  return pid;
}

void ForgetNamespaceInit(pid_t init) {
  std::lock_guard lock(g_mu);
  auto it = g_stacks.find(init);
  if (it == g_stacks.end()) return;
  ::munmap(it->second, kStackBytes);
  g_stacks.erase(it);
}

}  // namespace kc::worker
