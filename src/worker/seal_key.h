// SealKey: the worker process's 32-byte HMAC key for benchmark records
// (docs/benchmark-integrity.md "Sealed results").
//
// Made once per worker process in Serve(), before the ready frame hands it to the server (which
// checks seals with it); it lives only in C++ memory, never in a Python object. Where the kernel
// offers memfd_secret (Linux 5.14+, when enabled), the bytes sit in a page outside the kernel's
// direct map, so neither /proc/self/mem (readable from pure Python) nor process_vm_readv can
// read them; elsewhere they sit in an ordinary locked page kept out of core dumps.
//
// Immutable once made; the page is never unmapped (the seal capsule may be called until exit).
#pragma once

#include <memory>
#include <string_view>

#include "base/status.h"

namespace kc::worker {

class SealKey {
 public:
  static constexpr size_t kBytes = 32;

  // 32 bytes from getrandom(2), written straight into the key's page.
  static StatusOr<std::unique_ptr<SealKey>> Generate();

  SealKey(const SealKey&) = delete;
  SealKey& operator=(const SealKey&) = delete;

  std::string_view bytes() const { return {bytes_, kBytes}; }
  // True when the key is in secret memory (see above).
  bool in_secret_memory() const { return in_secret_memory_; }

 private:
  SealKey(const char* bytes, bool in_secret_memory)
      : bytes_(bytes), in_secret_memory_(in_secret_memory) {}

  const char* const bytes_;  // in a page of its own, mapped for the process's life
  const bool in_secret_memory_;
};

}  // namespace kc::worker
