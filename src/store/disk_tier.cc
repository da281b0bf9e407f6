#include "store/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "base/sha256.h"
#include "base/unique_fd.h"

// Every I/O error below is swallowed on purpose: the disk tier is best effort
// (server.md §4), so a failure turns into a miss or a no-op, never into a
// failed request. Paths are walked with directory fds and O_NOFOLLOW so a
// symlink planted inside the cache cannot redirect a read, write or unlink.

namespace kc::store {

namespace {

constexpr std::string_view kVersionDir = "v1";
constexpr std::string_view kTempPrefix = ".tmp-";
constexpr size_t kCopyChunkBytes = size_t{1} << 20;

enum class Create { kNo, kYes };

// Opens `name` under `parent_fd` as a directory without following a symlink,
// creating it 0700 first if asked.
UniqueFd OpenSubdir(int parent_fd, const std::string& name, Create create) {
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::openat(parent_fd, name.c_str(), kFlags));
  if (!fd.valid() && errno == ENOENT && create == Create::kYes) {
    if (::mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST) return UniqueFd();
    fd.Reset(::openat(parent_fd, name.c_str(), kFlags));
  }
  return fd;
}

// mkdir -p, with 0700 for the components it creates (existing ones keep their mode).
void MakeDirs(const std::filesystem::path& dir) {
  std::filesystem::path prefix;
  for (const auto& part : dir) {
    prefix /= part;
    ::mkdir(prefix.c_str(), 0700);
  }
}

// The configured root may itself be a symlink (say ~/.cache on another disk);
// everything below it is opened with O_NOFOLLOW.
UniqueFd OpenVersionDir(const std::filesystem::path& dir, Create create) {
  UniqueFd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return root;
  return OpenSubdir(root.get(), std::string(kVersionDir), create);
}

std::string ShardName(const std::string& sha256) {
  return sha256.substr(0, 2);
}

bool IsShardName(std::string_view name) {
  return name.size() == 2 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// flock(LOCK_EX) on the v1 directory for the lifetime of the object. It
// serializes writers and evictors across threads and processes sharing the dir.
class DirLock {
 public:
  explicit DirLock(int fd) : fd_(fd) {
    int rc;
    do {
      rc = ::flock(fd_, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    held_ = rc == 0;
  }
  ~DirLock() {
    if (held_) ::flock(fd_, LOCK_UN);
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  bool held() const { return held_; }

 private:
  const int fd_;
  bool held_ = false;
};

std::string RandomHex() {
  unsigned char bytes[16];
  if (::getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : bytes) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 0xf]);
  }
  return hex;
}

// Copies the blob's memfd into `out_fd` without holding all of it in memory twice.
bool CopyBlob(const Blob& blob, int out_fd) {
  std::string buffer(std::min(kCopyChunkBytes, std::max<size_t>(blob.size(), 1)), '\0');
  size_t offset = 0;
  while (offset < blob.size()) {
    size_t want = std::min(buffer.size(), blob.size() - offset);
    ssize_t n = ::pread(blob.fd(), buffer.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    size_t written = 0;
    while (written < static_cast<size_t>(n)) {
      ssize_t w = ::write(out_fd, buffer.data() + written, static_cast<size_t>(n) - written);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      written += static_cast<size_t>(w);
    }
    offset += static_cast<size_t>(n);
  }
  return true;
}

// Writes `blob` as `<shard>/<sha256>` through a temp file and an atomic rename.
bool WriteBlobFile(int shard_fd, const Blob& blob) {
  std::string random = RandomHex();
  if (random.empty()) return false;
  std::string temp_name = std::string(kTempPrefix) + random;
  UniqueFd out(::openat(shard_fd, temp_name.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out.valid()) return false;
  bool ok = CopyBlob(blob, out.get());
  out.Reset();
  if (ok) ok = ::renameat(shard_fd, temp_name.c_str(), shard_fd, blob.sha256().c_str()) == 0;
  if (!ok) ::unlinkat(shard_fd, temp_name.c_str(), 0);
  return ok;
}

// Reads a whole file while hashing it. Returns false on an I/O error.
bool ReadAndHash(int fd, size_t size_hint, std::string& bytes, std::string& digest) {
  Sha256 hasher;
  bytes.clear();
  bytes.reserve(size_hint);
  std::string chunk(kCopyChunkBytes, '\0');
  for (;;) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    hasher.Update(chunk.data(), static_cast<size_t>(n));
    bytes.append(chunk.data(), static_cast<size_t>(n));
  }
  digest = hasher.HexDigest();
  return true;
}

struct ScannedFile {
  std::string sha256;
  uint64_t size;
  struct timespec mtime;
};

// Lists the blob files of one shard and removes its stale temp files. Runs
// under the flock, so no writer's temp file is in flight.
void ScanShard(int v1_fd, const std::string& shard, std::vector<ScannedFile>& files) {
  UniqueFd shard_fd = OpenSubdir(v1_fd, shard, Create::kNo);
  if (!shard_fd.valid()) return;
  UniqueFd list_fd(::dup(shard_fd.get()));
  if (!list_fd.valid()) return;
  DIR* dir = ::fdopendir(list_fd.get());
  if (dir == nullptr) return;
  list_fd.Release();  // now owned by `dir`
  while (struct dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.starts_with(kTempPrefix)) {
      ::unlinkat(shard_fd.get(), name.c_str(), 0);
      continue;
    }
    if (!IsSha256Hex(name) || ShardName(name) != shard) continue;
    struct stat st;
    if (::fstatat(shard_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode)) continue;
    files.push_back({name, static_cast<uint64_t>(st.st_size), st.st_mtim});
  }
  ::closedir(dir);
}

std::vector<ScannedFile> ScanVersionDir(int v1_fd) {
  std::vector<ScannedFile> files;
  UniqueFd list_fd(::dup(v1_fd));
  if (!list_fd.valid()) return files;
  DIR* dir = ::fdopendir(list_fd.get());
  if (dir == nullptr) return files;
  list_fd.Release();  // now owned by `dir`
  std::vector<std::string> shards;
  while (struct dirent* entry = ::readdir(dir)) {
    if (IsShardName(entry->d_name)) shards.emplace_back(entry->d_name);
  }
  ::closedir(dir);
  for (const std::string& shard : shards)
    ScanShard(v1_fd, shard, files);
  return files;
}

// Unlinks `<shard>/<sha256>` only if it is still the file behind `seen`, so a
// good copy renamed into place by another writer meanwhile survives.
void RemoveIfSameFile(const std::filesystem::path& dir, const std::string& sha256,
                      const struct stat& seen) {
  UniqueFd v1 = OpenVersionDir(dir, Create::kNo);
  if (!v1.valid()) return;
  DirLock lock(v1.get());
  if (!lock.held()) return;
  UniqueFd shard = OpenSubdir(v1.get(), ShardName(sha256), Create::kNo);
  if (!shard.valid()) return;
  struct stat now;
  if (::fstatat(shard.get(), sha256.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (now.st_dev == seen.st_dev && now.st_ino == seen.st_ino) {
    ::unlinkat(shard.get(), sha256.c_str(), 0);
  }
}

}  // namespace

DiskTier::DiskTier(std::filesystem::path dir, uint64_t capacity_bytes)
    : dir_(std::move(dir)), capacity_bytes_(capacity_bytes) {
  if (dir_.empty() || capacity_bytes_ == 0) return;
  MakeDirs(dir_);
  // An unusable directory behaves as a disabled tier (server.md §4).
  if (!OpenVersionDir(dir_, Create::kYes).valid()) return;
  enabled_ = true;
  LoadIndex();
}

void DiskTier::LoadIndex() {
  UniqueFd v1 = OpenVersionDir(dir_, Create::kNo);
  if (!v1.valid()) return;
  DirLock lock(v1.get());
  if (!lock.held()) return;
  std::vector<ScannedFile> files = ScanVersionDir(v1.get());
  // Oldest mtime first, so it gets the smallest logical time (least recently used).
  std::sort(files.begin(), files.end(), [](const ScannedFile& a, const ScannedFile& b) {
    return std::tie(a.mtime.tv_sec, a.mtime.tv_nsec) < std::tie(b.mtime.tv_sec, b.mtime.tv_nsec);
  });
  std::lock_guard<std::mutex> guard(mu_);
  for (const ScannedFile& file : files)
    TouchLocked(file.sha256, file.size);
  EvictLocked(v1.get());  // the capacity may have shrunk since the last run
}

void DiskTier::Put(const Blob& blob) {
  if (!enabled_ || blob.size() > capacity_bytes_ || !IsSha256Hex(blob.sha256())) return;
  UniqueFd v1 = OpenVersionDir(dir_, Create::kYes);
  if (!v1.valid()) return;
  DirLock lock(v1.get());
  if (!lock.held()) return;
  UniqueFd shard = OpenSubdir(v1.get(), ShardName(blob.sha256()), Create::kYes);
  if (!shard.valid()) return;

  const char* name = blob.sha256().c_str();
  struct stat st;
  bool present = ::fstatat(shard.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == blob.size();
  if (present) {
    ::utimensat(shard.get(), name, nullptr, AT_SYMLINK_NOFOLLOW);  // bump recency
  } else if (!WriteBlobFile(shard.get(), blob)) {
    return;
  }
  std::lock_guard<std::mutex> guard(mu_);
  TouchLocked(blob.sha256(), blob.size());
  EvictLocked(v1.get());
}

BlobPtr DiskTier::Get(const std::string& sha256) {
  if (!enabled_ || !IsSha256Hex(sha256)) return nullptr;
  UniqueFd v1 = OpenVersionDir(dir_, Create::kNo);
  if (!v1.valid()) return nullptr;
  UniqueFd shard = OpenSubdir(v1.get(), ShardName(sha256), Create::kNo);
  if (!shard.valid()) return nullptr;
  // O_NONBLOCK: a FIFO planted under this name must not hang the open.
  UniqueFd file(
      ::openat(shard.get(), sha256.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!file.valid()) {
    if (errno == ENOENT || errno == ELOOP) Forget(sha256);  // evicted elsewhere, or a symlink
    return nullptr;
  }
  struct stat st;
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;

  std::string bytes;
  std::string digest;
  if (!ReadAndHash(file.get(), static_cast<size_t>(st.st_size), bytes, digest)) return nullptr;
  if (digest != sha256) {
    RemoveIfSameFile(dir_, sha256, st);
    Forget(sha256);
    return nullptr;
  }
  ::futimens(file.get(), nullptr);  // mtime carries recency across restarts (atime is unreliable)
  StatusOr<BlobPtr> blob = Blob::FromBytes(sha256, bytes);
  if (!blob.ok()) return nullptr;
  // A Put in another thread may have evicted the file since we opened it (its
  // eviction unlinks under mu_): index only what is still on disk.
  std::lock_guard<std::mutex> guard(mu_);
  struct stat now;
  if (::fstatat(shard.get(), sha256.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISREG(now.st_mode)) {
    TouchLocked(sha256, static_cast<uint64_t>(now.st_size));
  } else {
    ForgetLocked(sha256);
  }
  return *std::move(blob);
}

bool DiskTier::Contains(const std::string& sha256) const {
  if (!enabled_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return index_.contains(sha256);
}

uint64_t DiskTier::size_bytes() const {
  std::lock_guard<std::mutex> guard(mu_);
  return size_bytes_;
}

void DiskTier::EvictLocked(int v1_fd) {
  while (size_bytes_ > capacity_bytes_ && !by_use_.empty()) {
    std::string victim = by_use_.begin()->second;
    UniqueFd shard = OpenSubdir(v1_fd, ShardName(victim), Create::kNo);
    if (shard.valid()) ::unlinkat(shard.get(), victim.c_str(), 0);
    // Forgotten even if the unlink failed: retrying it forever helps nobody.
    ForgetLocked(victim);
  }
}

void DiskTier::TouchLocked(const std::string& sha256, uint64_t size) {
  auto [it, inserted] = index_.try_emplace(sha256, Entry{size, 0});
  if (!inserted) {
    by_use_.erase(it->second.last_use);
    size_bytes_ -= it->second.size;
    it->second.size = size;
  }
  size_bytes_ += size;
  it->second.last_use = ++clock_;
  by_use_.emplace(it->second.last_use, sha256);
}

void DiskTier::ForgetLocked(const std::string& sha256) {
  auto it = index_.find(sha256);
  if (it == index_.end()) return;
  by_use_.erase(it->second.last_use);
  size_bytes_ -= it->second.size;
  index_.erase(it);
}

void DiskTier::Forget(const std::string& sha256) {
  std::lock_guard<std::mutex> guard(mu_);
  ForgetLocked(sha256);
}

}  // namespace kc::store
