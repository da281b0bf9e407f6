#include "worker/output_capture.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace kc::worker {

OutputCapture::OutputCapture(int stdout_fd, int stderr_fd)
    : saved_stdout_(::fcntl(1, F_DUPFD_CLOEXEC, 3)), saved_stderr_(::fcntl(2, F_DUPFD_CLOEXEC, 3)) {
  std::fflush(nullptr);
  ::dup2(stdout_fd, 1);
  ::dup2(stderr_fd, 2);
}

void OutputCapture::Restore() {
  if (!saved_stdout_.valid()) return;
  std::fflush(nullptr);
  ::dup2(saved_stdout_.get(), 1);
  ::dup2(saved_stderr_.get(), 2);
  saved_stdout_.Reset();
  saved_stderr_.Reset();
}

}  // namespace kc::worker
