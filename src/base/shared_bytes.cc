#include "base/shared_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "base/memfd.h"

namespace kc {

SharedBytes SharedBytes::Of(std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  SharedBytes out;
  out.view_ = *owned;
  out.keeper_ = std::move(owned);
  return out;
}

StatusOr<SharedBytes> SharedBytes::MapSealedMemfd(int fd) {
  constexpr int kNeeded = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kNeeded) != kNeeded) {
    return InvalidArgumentError("not a memfd sealed against writes and resizing");
  }
  KC_ASSIGN_OR_RETURN(size_t size, FdSize(fd));
  SharedBytes out;
  if (size == 0) return out;
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) return InternalError(std::string("mmap: ") + std::strerror(errno));
  out.view_ = std::string_view(static_cast<const char*>(address), size);
  out.keeper_ = std::shared_ptr<const void>(
      address, [size](const void* mapped) { ::munmap(const_cast<void*>(mapped), size); });
  return out;
}

}  // namespace kc
