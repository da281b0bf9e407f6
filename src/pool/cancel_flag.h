// CancelFlag: raised when the client of a request goes away (it closed its
// connection), so that the pool skips the program if it is still queued and
// kills its worker if it is running (spec/server.md "Real cancellation":
// abandoned benchmarks must not keep burning GPU time).
//
// It is also an eventfd, readable once raised, so a worker's poll loop wakes
// at once. Thread-safe.
#pragma once

#include <sys/eventfd.h>

#include <atomic>
#include <cstdint>

#include "base/unique_fd.h"

namespace kc::pool {

class CancelFlag {
 public:
  CancelFlag() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  void Raise() {
    if (raised_.exchange(true)) return;
    const uint64_t one = 1;
    (void)!::write(fd_.get(), &one, sizeof(one));
  }
  bool raised() const { return raised_.load(); }
  // Readable once raised; -1 if no eventfd could be made (poll ignores it).
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  std::atomic<bool> raised_{false};
};

}  // namespace kc::pool
