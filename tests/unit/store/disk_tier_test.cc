#include "store/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../temp_dir.h"
#include "base/sha256.h"

namespace kc::store {
namespace {

namespace fs = std::filesystem;

BlobPtr MakeBlob(const std::string& bytes) {
  StatusOr<BlobPtr> blob = Blob::FromBytes(Sha256Hex(bytes), bytes);
  EXPECT_TRUE(blob.ok()) << blob.status().message();
  return blob.ok() ? *blob : nullptr;
}

size_t OpenFdCount() {
  return static_cast<size_t>(
      std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator()));
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(temp_.path().empty()); }

  fs::path cache_dir() const { return temp_.path() / "cache"; }
  fs::path BlobPath(const std::string& sha256) const {
    return cache_dir() / "v1" / sha256.substr(0, 2) / sha256;
  }
  // Sets a file's mtime to `seconds` since the epoch, to order entries for a reopen.
  static void SetMtime(const fs::path& path, time_t seconds) {
    struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  }

  kc::testing::TempDir temp_;
};

TEST_F(DiskTierTest, PutThenGetReturnsTheSameBytes) {
  DiskTier tier(cache_dir(), 1 << 20);
  ASSERT_TRUE(tier.enabled());
  BlobPtr blob = MakeBlob("file contents");
  tier.Put(*blob);
  BlobPtr hit = tier.Get(blob->sha256());
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->sha256(), blob->sha256());
  EXPECT_EQ(hit->size(), blob->size());
  StatusOr<std::string> bytes = hit->ReadAll();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "file contents");
  EXPECT_EQ(tier.size_bytes(), blob->size());
}

TEST_F(DiskTierTest, HitIsASealedMemfd) {
  DiskTier tier(cache_dir(), 1 << 20);
  BlobPtr blob = MakeBlob("sealed");
  tier.Put(*blob);
  BlobPtr hit = tier.Get(blob->sha256());
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(::pwrite(hit->fd(), "X", 1, 0), -1);
}

TEST_F(DiskTierTest, UnknownHashIsAMiss) {
  DiskTier tier(cache_dir(), 1 << 20);
  EXPECT_EQ(tier.Get(Sha256Hex("never stored")), nullptr);
}

TEST_F(DiskTierTest, MalformedHashIsAMiss) {
  DiskTier tier(cache_dir(), 1 << 20);
  EXPECT_EQ(tier.Get("../../etc/passwd"), nullptr);
  EXPECT_EQ(tier.Get(""), nullptr);
}

TEST_F(DiskTierTest, LayoutIsVersionShardHashWithPrivateModes) {
  DiskTier tier(cache_dir(), 1 << 20);
  BlobPtr blob = MakeBlob("layout");
  tier.Put(*blob);
  fs::path file = BlobPath(blob->sha256());
  struct stat st;
  ASSERT_EQ(::lstat(file.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(file), "layout");
  for (const fs::path& dir : {cache_dir(), cache_dir() / "v1", file.parent_path()}) {
    ASSERT_EQ(::lstat(dir.c_str(), &st), 0) << dir;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
  // Nothing but the blob itself: no temp files or sidecars left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(file.parent_path()), fs::directory_iterator()), 1);
}

TEST_F(DiskTierTest, DisabledWhenTheDirIsEmpty) {
  DiskTier tier("", 1 << 20);
  EXPECT_FALSE(tier.enabled());
  BlobPtr blob = MakeBlob("off");
  tier.Put(*blob);
  EXPECT_EQ(tier.Get(blob->sha256()), nullptr);
  EXPECT_EQ(tier.size_bytes(), 0u);
}

TEST_F(DiskTierTest, DisabledWhenTheCapacityIsZero) {
  DiskTier tier(cache_dir(), 0);
  EXPECT_FALSE(tier.enabled());
  BlobPtr blob = MakeBlob("off");
  tier.Put(*blob);
  EXPECT_EQ(tier.Get(blob->sha256()), nullptr);
  EXPECT_FALSE(fs::exists(cache_dir()));
}

TEST_F(DiskTierTest, UnusableDirBehavesAsDisabled) {
  WriteFile(temp_.path() / "plain-file", "x");
  DiskTier tier(temp_.path() / "plain-file" / "cache", 1 << 20);
  EXPECT_FALSE(tier.enabled());
  BlobPtr blob = MakeBlob("nowhere");
  tier.Put(*blob);
  EXPECT_EQ(tier.Get(blob->sha256()), nullptr);
}

TEST_F(DiskTierTest, SurvivesReopen) {
  BlobPtr blob = MakeBlob("persistent");
  {
    DiskTier tier(cache_dir(), 1 << 20);
    tier.Put(*blob);
  }
  DiskTier reopened(cache_dir(), 1 << 20);
  EXPECT_EQ(reopened.size_bytes(), blob->size());
  BlobPtr hit = reopened.Get(blob->sha256());
  ASSERT_NE(hit, nullptr);
  StatusOr<std::string> bytes = hit->ReadAll();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "persistent");
}

TEST_F(DiskTierTest, CorruptFileIsAMissAndRemoved) {
  DiskTier tier(cache_dir(), 1 << 20);
  BlobPtr blob = MakeBlob("original bytes");
  tier.Put(*blob);
  WriteFile(BlobPath(blob->sha256()), "tampered bytes");
  EXPECT_EQ(tier.Get(blob->sha256()), nullptr);
  EXPECT_FALSE(fs::exists(fs::symlink_status(BlobPath(blob->sha256()))));
  EXPECT_EQ(tier.size_bytes(), 0u);
  // A later Put stores a good copy again.
  tier.Put(*blob);
  EXPECT_NE(tier.Get(blob->sha256()), nullptr);
}

TEST_F(DiskTierTest, SymlinkIsNotFollowed) {
  DiskTier tier(cache_dir(), 1 << 20);
  std::string bytes = "behind a symlink";
  std::string sha = Sha256Hex(bytes);
  fs::path outside = temp_.path() / "outside";
  WriteFile(outside, bytes);
  fs::create_directories(BlobPath(sha).parent_path());
  fs::create_symlink(outside, BlobPath(sha));
  EXPECT_EQ(tier.Get(sha), nullptr);
  EXPECT_EQ(ReadFile(outside), bytes);  // the target is neither read as a hit nor removed
}

TEST_F(DiskTierTest, SymlinkedShardDirIsNotFollowed) {
  DiskTier tier(cache_dir(), 1 << 20);
  std::string bytes = "in a symlinked shard";
  std::string sha = Sha256Hex(bytes);
  fs::path outside_dir = temp_.path() / "outside-dir";
  fs::create_directories(outside_dir);
  WriteFile(outside_dir / sha, bytes);
  fs::create_directories(cache_dir() / "v1");
  fs::create_directory_symlink(outside_dir, BlobPath(sha).parent_path());
  EXPECT_EQ(tier.Get(sha), nullptr);
  BlobPtr blob = MakeBlob(bytes);
  tier.Put(*blob);  // cannot open the shard without following the link: a no-op
  EXPECT_EQ(ReadFile(outside_dir / sha), bytes);
  EXPECT_EQ(std::distance(fs::directory_iterator(outside_dir), fs::directory_iterator()), 1);
}

TEST_F(DiskTierTest, PutReplacesASymlinkWithoutWritingThroughIt) {
  DiskTier tier(cache_dir(), 1 << 20);
  BlobPtr blob = MakeBlob("real bytes");
  fs::path outside = temp_.path() / "victim";
  WriteFile(outside, "do not touch");
  fs::create_directories(BlobPath(blob->sha256()).parent_path());
  fs::create_symlink(outside, BlobPath(blob->sha256()));
  tier.Put(*blob);
  EXPECT_EQ(ReadFile(outside), "do not touch");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(BlobPath(blob->sha256()))));
  EXPECT_NE(tier.Get(blob->sha256()), nullptr);
}

TEST_F(DiskTierTest, FifoIsAMissNotAHang) {
  DiskTier tier(cache_dir(), 1 << 20);
  std::string sha = Sha256Hex("fifo");
  fs::create_directories(BlobPath(sha).parent_path());
  ASSERT_EQ(::mkfifo(BlobPath(sha).c_str(), 0600), 0);
  EXPECT_EQ(tier.Get(sha), nullptr);
}

TEST_F(DiskTierTest, LeastRecentlyUsedIsEvictedFirst) {
  DiskTier tier(cache_dir(), 30);
  BlobPtr a = MakeBlob(std::string(10, 'a'));
  BlobPtr b = MakeBlob(std::string(10, 'b'));
  BlobPtr c = MakeBlob(std::string(10, 'c'));
  tier.Put(*a);
  tier.Put(*b);
  tier.Put(*c);
  ASSERT_NE(tier.Get(a->sha256()), nullptr);  // b is now the least recently used
  BlobPtr d = MakeBlob(std::string(10, 'd'));
  tier.Put(*d);
  EXPECT_EQ(tier.size_bytes(), 30u);
  EXPECT_FALSE(fs::exists(BlobPath(b->sha256())));
  EXPECT_EQ(tier.Get(b->sha256()), nullptr);
  EXPECT_NE(tier.Get(a->sha256()), nullptr);
  EXPECT_NE(tier.Get(c->sha256()), nullptr);
  EXPECT_NE(tier.Get(d->sha256()), nullptr);
}

TEST_F(DiskTierTest, PutOfAStoredBlobRefreshesRecency) {
  DiskTier tier(cache_dir(), 20);
  BlobPtr a = MakeBlob(std::string(10, 'a'));
  BlobPtr b = MakeBlob(std::string(10, 'b'));
  tier.Put(*a);
  tier.Put(*b);
  tier.Put(*a);
  EXPECT_EQ(tier.size_bytes(), 20u);
  tier.Put(*MakeBlob(std::string(10, 'c')));
  EXPECT_TRUE(fs::exists(BlobPath(a->sha256())));
  EXPECT_FALSE(fs::exists(BlobPath(b->sha256())));
}

TEST_F(DiskTierTest, BlobLargerThanTheCapacityIsNotStored) {
  DiskTier tier(cache_dir(), 10);
  BlobPtr big = MakeBlob(std::string(11, 'x'));
  tier.Put(*big);
  EXPECT_EQ(tier.Get(big->sha256()), nullptr);
  EXPECT_FALSE(fs::exists(BlobPath(big->sha256())));
  BlobPtr fits = MakeBlob(std::string(10, 'x'));
  tier.Put(*fits);
  EXPECT_NE(tier.Get(fits->sha256()), nullptr);
}

TEST_F(DiskTierTest, ReopenOrdersByMtimeAndEvictsToTheNewCapacity) {
  BlobPtr a = MakeBlob(std::string(10, 'a'));
  BlobPtr b = MakeBlob(std::string(10, 'b'));
  BlobPtr c = MakeBlob(std::string(10, 'c'));
  {
    DiskTier tier(cache_dir(), 100);
    tier.Put(*a);
    tier.Put(*b);
    tier.Put(*c);
  }
  SetMtime(BlobPath(a->sha256()), 3000);
  SetMtime(BlobPath(b->sha256()), 1000);  // oldest
  SetMtime(BlobPath(c->sha256()), 2000);
  DiskTier reopened(cache_dir(), 20);
  EXPECT_EQ(reopened.size_bytes(), 20u);
  EXPECT_FALSE(fs::exists(BlobPath(b->sha256())));
  EXPECT_TRUE(fs::exists(BlobPath(a->sha256())));
  EXPECT_TRUE(fs::exists(BlobPath(c->sha256())));
}

TEST_F(DiskTierTest, HitBumpsTheFileMtime) {
  DiskTier tier(cache_dir(), 100);
  BlobPtr a = MakeBlob("bump me");
  tier.Put(*a);
  SetMtime(BlobPath(a->sha256()), 1000);
  ASSERT_NE(tier.Get(a->sha256()), nullptr);
  struct stat st;
  ASSERT_EQ(::lstat(BlobPath(a->sha256()).c_str(), &st), 0);
  EXPECT_GT(st.st_mtim.tv_sec, 1000);
}

TEST_F(DiskTierTest, StaleTempFilesAreRemovedAtOpen) {
  std::string sha = Sha256Hex("x");
  fs::path shard = cache_dir() / "v1" / sha.substr(0, 2);
  fs::create_directories(shard);
  WriteFile(shard / ".tmp-0123456789abcdef", "half written");
  WriteFile(shard / "not-a-blob", "left alone");
  DiskTier tier(cache_dir(), 100);
  EXPECT_FALSE(fs::exists(shard / ".tmp-0123456789abcdef"));
  EXPECT_TRUE(fs::exists(shard / "not-a-blob"));
  EXPECT_EQ(tier.size_bytes(), 0u);
}

TEST_F(DiskTierTest, FileInTheWrongShardIsNotIndexed) {
  std::string sha = Sha256Hex("misplaced");
  std::string wrong_shard = sha[0] == '0' ? "11" : "00";
  fs::create_directories(cache_dir() / "v1" / wrong_shard);
  WriteFile(cache_dir() / "v1" / wrong_shard / sha, "misplaced");
  DiskTier tier(cache_dir(), 100);
  EXPECT_EQ(tier.size_bytes(), 0u);
}

TEST_F(DiskTierTest, FileRemovedBehindItsBackIsAMiss) {
  DiskTier tier(cache_dir(), 100);
  BlobPtr a = MakeBlob("gone");
  tier.Put(*a);
  fs::remove(BlobPath(a->sha256()));
  EXPECT_EQ(tier.Get(a->sha256()), nullptr);
  EXPECT_EQ(tier.size_bytes(), 0u);
}

TEST_F(DiskTierTest, TwoTiersCanShareADirectory) {
  DiskTier first(cache_dir(), 100);
  DiskTier second(cache_dir(), 100);
  BlobPtr a = MakeBlob("shared");
  first.Put(*a);
  BlobPtr hit = second.Get(a->sha256());
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(second.size_bytes(), a->size());
}

TEST_F(DiskTierTest, EmptyBlobRoundTrips) {
  DiskTier tier(cache_dir(), 100);
  BlobPtr empty = MakeBlob("");
  tier.Put(*empty);
  BlobPtr hit = tier.Get(empty->sha256());
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->size(), 0u);
}

TEST_F(DiskTierTest, OperationsLeakNoFds) {
  size_t before = OpenFdCount();
  {
    DiskTier tier(cache_dir(), 25);
    for (char tag = 'a'; tag <= 'e'; ++tag) {
      BlobPtr blob = MakeBlob(std::string(10, tag));
      tier.Put(*blob);
      EXPECT_NE(tier.Get(blob->sha256()), nullptr);
    }
    WriteFile(BlobPath(Sha256Hex(std::string(10, 'e'))), "corrupt");
    EXPECT_EQ(tier.Get(Sha256Hex(std::string(10, 'e'))), nullptr);
    EXPECT_EQ(tier.Get(Sha256Hex("absent")), nullptr);
  }
  EXPECT_EQ(OpenFdCount(), before);
}

TEST_F(DiskTierTest, ConcurrentPutsAndGetsStayWithinCapacity) {
  DiskTier tier(cache_dir(), 200);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tier, t] {
      for (int i = 0; i < 40; ++i) {
        std::string bytes = std::string(10 + i % 7, static_cast<char>('a' + (t * 40 + i) % 26)) +
                            std::to_string(i % 13);
        BlobPtr blob = MakeBlob(bytes);
        tier.Put(*blob);
        BlobPtr hit = tier.Get(blob->sha256());
        if (hit != nullptr) {
          StatusOr<std::string> read = hit->ReadAll();
          EXPECT_TRUE(read.ok() && *read == bytes);
        }
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_LE(tier.size_bytes(), 200u);
  DiskTier reopened(cache_dir(), 200);
  EXPECT_EQ(reopened.size_bytes(), tier.size_bytes());
}

}  // namespace
}  // namespace kc::store
