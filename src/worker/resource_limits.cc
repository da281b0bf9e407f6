#include "worker/resource_limits.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/unique_fd.h"

namespace kc::worker {

Status LimitResources(uint64_t address_space_mbytes) {
  // Raising one's own score needs no privilege. Best effort: a /proc we may
  // not write to must not stop the worker from serving.
  UniqueFd oom(::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC));
  if (oom.valid()) (void)!::write(oom.get(), "1000", 4);
  if (address_space_mbytes == 0) return Status();
  const rlim_t bytes = static_cast<rlim_t>(address_space_mbytes) << 20;
  const rlimit limit{bytes, bytes};
  if (::setrlimit(RLIMIT_AS, &limit) != 0) {
    return InternalError(std::string("cannot cap the address space: ") + std::strerror(errno));
  }
  return Status();
}

}  // namespace kc::worker
