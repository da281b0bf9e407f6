// BuildCache: compile caches (tvm_ffi's build directories, and whatever else
// a program leaves under its HOME's cache) kept across sandboxed workers
// without a cache that every request can write (docs/sandbox.md).
//
// An entry is keyed by the SHA-256 of the whole program JSON, which names
// every uploaded blob by its hash, and it is filled only from a run of that
// very program: a request can read only what a byte-identical program wrote,
// so no program can plant a library that another one loads. The server copies
// an entry into a new request's workspace before the run (the worker owns the
// copy) and saves the workspace's cache after a run the worker answered.
// Copies never follow a link (user code controls the tree being saved).
//
// Thread-safe: entries appear by rename, and readers copy what is complete.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

namespace kc::store {

class BuildCache {
 public:
  // `dir` empty: the cache is off. `capacity_bytes` bounds the whole cache;
  // an entry that would pass it is not saved.
  BuildCache(std::filesystem::path dir, uint64_t capacity_bytes);

  bool enabled() const { return !dir_.empty(); }
  static std::string KeyOf(std::string_view program_json);

  // Copies the entry for `key`, if any, into `cache_dir` (created if needed),
  // owned by uid/gid. Returns the bytes copied (0: no entry).
  uint64_t Restore(const std::string& key, const std::filesystem::path& cache_dir, uid_t uid,
                   gid_t gid) const;
  // Saves `cache_dir` as the entry for `key` unless one exists, it is empty,
  // or it would not fit. Regular files and directories only.
  void Save(const std::string& key, const std::filesystem::path& cache_dir);

 private:
  const std::filesystem::path dir_;
  const uint64_t capacity_bytes_;
  std::atomic<uint64_t> used_bytes_{0};
};

}  // namespace kc::store
