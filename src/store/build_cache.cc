#include "store/build_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <string>
#include <vector>

#include "base/remove_tree.h"
#include "base/sha256.h"
#include "base/unique_fd.h"

namespace kc::store {

namespace fs = std::filesystem;

namespace {

constexpr int kOpenDir = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

struct CopyOwner {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};

bool CopyFile(int from_dir, int to_dir, const std::string& name, const struct stat& st,
              const CopyOwner& owner, uint64_t* budget) {
  if (static_cast<uint64_t>(st.st_size) > *budget) return false;
  UniqueFd in(::openat(from_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  UniqueFd out(::openat(to_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        st.st_mode & 0755));
  if (!in.valid() || !out.valid()) return false;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(in.get(), buffer, sizeof buffer);
    if (n < 0) return false;
    if (n == 0) break;
    if (static_cast<uint64_t>(n) > *budget || ::write(out.get(), buffer, n) != n) return false;
    *budget -= static_cast<uint64_t>(n);
  }
  const timespec times[2] = {st.st_atim, st.st_mtim};  // build tools compare mtimes
  ::futimens(out.get(), times);
  if (owner.uid != static_cast<uid_t>(-1)) (void)!::fchown(out.get(), owner.uid, owner.gid);
  return true;
}

// Copies the tree under `from_dir` into `to_dir`: directories and regular
// files only, never through a link. False when anything did not fit or fail.
bool CopyTree(int from_dir, int to_dir, const CopyOwner& owner, uint64_t* budget, int depth = 0) {
  if (depth > 32) return false;
  bool ok = true;
  for (const std::string& name : EntryNames(from_dir)) {
    struct stat st;
    if (::fstatat(from_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      ok = CopyFile(from_dir, to_dir, name, st, owner, budget) && ok;
    } else if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(to_dir, name.c_str(), 0755) != 0 && errno != EEXIST) return false;
      UniqueFd from(::openat(from_dir, name.c_str(), kOpenDir));
      UniqueFd to(::openat(to_dir, name.c_str(), kOpenDir));
      if (!from.valid() || !to.valid()) return false;
      if (owner.uid != static_cast<uid_t>(-1)) (void)!::fchown(to.get(), owner.uid, owner.gid);
      ok = CopyTree(from.get(), to.get(), owner, budget, depth + 1) && ok;
    }
    if (!ok) return false;
  }
  return ok;
}

}  // namespace

BuildCache::BuildCache(fs::path dir, uint64_t capacity_bytes)
    : dir_(std::move(dir)), capacity_bytes_(capacity_bytes) {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  ::chmod(dir_.c_str(), 0700);
  for (const auto& entry : fs::recursive_directory_iterator(dir_, ec)) {
    if (entry.is_regular_file(ec)) used_bytes_ += entry.file_size(ec);
  }
}

std::string BuildCache::KeyOf(std::string_view program_json) {
  return Sha256Hex(program_json);
}

uint64_t BuildCache::Restore(const std::string& key, const fs::path& cache_dir, uid_t uid,
                             gid_t gid) const {
  if (!enabled()) return 0;
  UniqueFd entry(::open((dir_ / key).c_str(), kOpenDir));
  if (!entry.valid()) return 0;
  UniqueFd to(::open(cache_dir.c_str(), kOpenDir));
  if (!to.valid()) return 0;
  uint64_t budget = capacity_bytes_;
  CopyTree(entry.get(), to.get(), {uid, gid}, &budget);
  return capacity_bytes_ - budget;
}

void BuildCache::Save(const std::string& key, const fs::path& cache_dir) {
  if (!enabled() || ::access((dir_ / key).c_str(), F_OK) == 0) return;
  UniqueFd from(::open(cache_dir.c_str(), kOpenDir));
  if (!from.valid() || EntryNames(from.get()).empty()) return;
  const fs::path staging =
      dir_ / (".staging-" + key + "-" + std::to_string(std::random_device{}()));
  if (::mkdir(staging.c_str(), 0755) != 0) return;
  UniqueFd to(::open(staging.c_str(), kOpenDir));
  const uint64_t left = capacity_bytes_ > used_bytes_ ? capacity_bytes_ - used_bytes_ : 0;
  uint64_t budget = left;
  // A renamed directory is complete, and only one writer wins a key.
  if (to.valid() && CopyTree(from.get(), to.get(), {}, &budget) &&
      ::rename(staging.c_str(), (dir_ / key).c_str()) == 0) {
    used_bytes_ += left - budget;
    return;
  }
  RemoveTree(staging.string());
}

}  // namespace kc::store
