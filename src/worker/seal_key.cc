#include "worker/seal_key.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/unique_fd.h"

namespace kc::worker {

namespace {

#ifndef SYS_memfd_secret
constexpr long kMemfdSecret = 447;  // the same number on x86-64 and arm64
#else
constexpr long kMemfdSecret = SYS_memfd_secret;
#endif

constexpr size_t kPageBytes = 4096;

// A page of secret memory, or nullptr where the kernel has none (ENOSYS, disabled, or the
// memlock limit is spent: secret memory counts as locked).
void* MapSecretPage() {
  UniqueFd fd(static_cast<int>(::syscall(kMemfdSecret, 0)));
  if (!fd.valid()) return nullptr;
  if (::ftruncate(fd.get(), kPageBytes) != 0) return nullptr;
  void* page = ::mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  return page == MAP_FAILED ? nullptr : page;  // the mapping outlives the descriptor
}

void* MapOrdinaryPage() {
  void* page =
      ::mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return nullptr;
  ::madvise(page, kPageBytes, MADV_DONTDUMP);
  ::mlock(page, kPageBytes);  // best effort: keeps it out of swap
  return page;
}

}  // namespace

StatusOr<std::unique_ptr<SealKey>> SealKey::Generate() {
  void* page = MapSecretPage();
  const bool secret = page != nullptr;
  if (!secret) page = MapOrdinaryPage();
  if (page == nullptr) return InternalError(std::string("seal key: mmap: ") + std::strerror(errno));
  char* bytes = static_cast<char*>(page);
  size_t filled = 0;
  while (filled < kBytes) {
    ssize_t n = ::getrandom(bytes + filled, kBytes - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InternalError(std::string("seal key: getrandom: ") + std::strerror(errno));
    filled += static_cast<size_t>(n);
  }
  // Written once; read-only from here on, so no bug of ours can change it under a seal.
  ::mprotect(page, kPageBytes, PROT_READ);
  return std::unique_ptr<SealKey>(new SealKey(bytes, secret));
}

}  // namespace kc::worker
