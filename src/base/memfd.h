// Sealed memfds: how blob bytes and large results travel between the server
// and workers without being copied through the control socket (DESIGN.md
// "Data path"). A sealed memfd cannot be written or resized by anyone, so a
// worker that maps a cached blob cannot change what the next request sees.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"

namespace kc {

// Creates a memfd holding a copy of `bytes`, sealed against writes and resizes.
StatusOr<UniqueFd> MakeSealedMemfd(std::string_view name, std::string_view bytes);

// An empty, writable memfd (allow sealing).
StatusOr<UniqueFd> MakeMemfd(std::string_view name);

// Seals `fd` against writes, resizes and further seals.
Status SealMemfd(int fd);

// Size of the file behind `fd` (fstat).
StatusOr<size_t> FdSize(int fd);

// Reads up to `max_bytes` from offset 0 of `fd` (pread; does not move the offset).
StatusOr<std::string> ReadFdHead(int fd, size_t max_bytes);

// Reads the whole file behind `fd`.
StatusOr<std::string> ReadWholeFd(int fd);

// Writes all of `bytes` at the current offset, retrying short writes.
Status WriteAll(int fd, std::string_view bytes);

}  // namespace kc
