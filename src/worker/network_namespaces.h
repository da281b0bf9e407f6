// Network namespaces with only loopback, one per sandboxed worker at a time,
// held by the zygote. Creating a namespace and tearing it down costs about
// 1.5 ms of CPU on the CI machine, more than the rest of the sandbox, so the
// namespace of a worker that is gone is handed to the next one, but only
// when it is exactly as new: its socket tables, protocol counters and device
// statistics (/proc/net/...) read as they did right after it was created,
// i.e. the previous worker never used the network. Anything else and it is
// dropped, and the kernel destroys it. Release only after the worker's PID
// namespace has died: then no process can hold a socket in it any more.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "base/unique_fd.h"

namespace kc::worker {

class NetworkNamespaces {
 public:
  // A namespace for the next worker, as a descriptor for setns(2); the pool
  // keeps it and the worker's copy is closed with its other inherited ones.
  StatusOr<int> Acquire();
  // The worker that had `fd` is gone: reuse the namespace or drop it.
  void Release(int fd);

 private:
  struct Namespace {
    UniqueFd fd;
    std::string fingerprint;  // what its /proc/net files read when new
  };
  StatusOr<Namespace> Create();
  StatusOr<std::string> FingerprintOf(int fd);

  UniqueFd own_;  // the zygote's namespace, to return to
  std::vector<Namespace> idle_, lent_;
};

// Brings up `lo` in the calling thread's network namespace (a new one starts
// with it down).
Status BringUpLoopback();

}  // namespace kc::worker
