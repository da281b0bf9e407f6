#include "base/memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kc {

namespace {
Status Errno(std::string_view what) {
  return InternalError(std::string(what) + ": " + std::strerror(errno));
}
}  // namespace

StatusOr<UniqueFd> MakeMemfd(std::string_view name) {
  UniqueFd fd(::memfd_create(std::string(name).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Errno("memfd_create");
  return fd;
}

Status WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write");
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status SealMemfd(int fd) {
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0) {
    return Errno("F_ADD_SEALS");
  }
  return Status::Ok();
}

StatusOr<UniqueFd> MakeSealedMemfd(std::string_view name, std::string_view bytes) {
  KC_ASSIGN_OR_RETURN(UniqueFd fd, MakeMemfd(name));
  KC_RETURN_IF_ERROR(WriteAll(fd.get(), bytes));
  KC_RETURN_IF_ERROR(SealMemfd(fd.get()));
  return fd;
}

StatusOr<size_t> FdSize(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Errno("fstat");
  return static_cast<size_t>(st.st_size);
}

StatusOr<std::string> ReadFdHead(int fd, size_t max_bytes) {
  KC_ASSIGN_OR_RETURN(size_t size, FdSize(fd));
  std::string out(std::min(size, max_bytes), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("pread");
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

StatusOr<std::string> ReadWholeFd(int fd) {
  KC_ASSIGN_OR_RETURN(size_t size, FdSize(fd));
  return ReadFdHead(fd, size);
}

}  // namespace kc
