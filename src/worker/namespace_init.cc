#include "worker/namespace_init.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace kc::worker {

void RunNamespaceInit(pid_t worker) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the zygote, and the namespace with it
  ::syscall(SYS_close_range, 0u, ~0u, 0u);
  for (;;) {
    int status = 0;
    const pid_t reaped = ::waitpid(-1, &status, 0);
    if (reaped == worker) {
      std::_Exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
    }
    if (reaped < 0 && errno == ECHILD) std::_Exit(1);
  }
}

}  // namespace kc::worker
