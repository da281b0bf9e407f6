// OutputCapture: points the worker's fd 1 and fd 2 at the server's capture
// pipes for the whole request, so module top-level prints, native writes and
// child processes are all captured (spec/protocol.md §4.5). The server reads
// the pipes and keeps the head; the worker never buffers output itself.
//
// Usage (one request):
//   OutputCapture capture(stdout_pipe, stderr_pipe);   // fds 1, 2 redirected
//   ... run the program ...
//   capture.Restore();                                 // flushes, restores 1, 2
#pragma once

#include "base/unique_fd.h"

namespace kc::worker {

class OutputCapture {
 public:
  OutputCapture(int stdout_fd, int stderr_fd);
  ~OutputCapture() { Restore(); }
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;

  // Idempotent. Flushes C stdio before switching back.
  void Restore();

 private:
  UniqueFd saved_stdout_;
  UniqueFd saved_stderr_;
};

}  // namespace kc::worker
