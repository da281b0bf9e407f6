#include "store/blob.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <string>

#include <gtest/gtest.h>

#include "base/sha256.h"
#include "make_blob.h"

namespace kc::store {
namespace {

using testing::MakeBlob;

TEST(Blob, FromBytesKeepsHashSizeAndBytes) {
  BlobPtr blob = MakeBlob("hello blob");
  ASSERT_NE(blob, nullptr);
  EXPECT_EQ(blob->sha256(), Sha256Hex("hello blob"));
  EXPECT_EQ(blob->size(), 10u);
  StatusOr<std::string> bytes = blob->ReadAll();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "hello blob");
}

TEST(Blob, EmptyBytesMakeAnEmptyBlob) {
  BlobPtr blob = MakeBlob("");
  ASSERT_NE(blob, nullptr);
  EXPECT_EQ(blob->size(), 0u);
  StatusOr<std::string> bytes = blob->ReadAll();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "");
}

TEST(Blob, BinaryBytesRoundTrip) {
  std::string bytes;
  for (int i = 0; i < 3 * 256; ++i)
    bytes.push_back(static_cast<char>(i));
  BlobPtr blob = MakeBlob(bytes);
  ASSERT_NE(blob, nullptr);
  StatusOr<std::string> read = blob->ReadAll();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, bytes);
}

TEST(Blob, SealedMemfdCannotBeWrittenOrResized) {
  BlobPtr blob = MakeBlob("immutable");
  ASSERT_NE(blob, nullptr);
  EXPECT_EQ(::pwrite(blob->fd(), "X", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(blob->fd(), 0), 0);
  EXPECT_NE(::ftruncate(blob->fd(), 100), 0);
  void* map = ::mmap(nullptr, blob->size(), PROT_READ | PROT_WRITE, MAP_SHARED, blob->fd(), 0);
  EXPECT_EQ(map, MAP_FAILED);
  int seals = ::fcntl(blob->fd(), F_GET_SEALS);
  EXPECT_TRUE(seals & F_SEAL_SEAL);
  StatusOr<std::string> bytes = blob->ReadAll();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "immutable");
}

TEST(Blob, MemfdIsNamedKcoralBlob) {
  BlobPtr blob = MakeBlob("named");
  ASSERT_NE(blob, nullptr);
  std::string link = "/proc/self/fd/" + std::to_string(blob->fd());
  char target[PATH_MAX] = {};
  ASSERT_GT(::readlink(link.c_str(), target, sizeof(target) - 1), 0);
  EXPECT_EQ(std::string(target).rfind("/memfd:kcoral-blob", 0), 0u) << target;
}

// Whether `fd` is open on a blob's memfd (this test's process opens nothing meanwhile).
bool IsBlobMemfd(int fd) {
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  char target[PATH_MAX] = {};
  if (::readlink(link.c_str(), target, sizeof(target) - 1) <= 0) return false;
  return std::string(target).rfind("/memfd:kcoral-blob", 0) == 0;
}

TEST(Blob, ASmallBlobsMemfdIsClosedWithItsLastReference) {
  BlobPtr blob = MakeBlob("small");
  ASSERT_NE(blob, nullptr);
  const int fd = blob->fd();
  blob.reset();
  EXPECT_FALSE(IsBlobMemfd(fd));
}

TEST(Blob, ALargeBlobsMemfdIsClosedSoonAfterItsLastReference) {
  BlobPtr blob = MakeBlob(std::string(size_t{8} << 20, 'x'));
  ASSERT_NE(blob, nullptr);
  const int fd = blob->fd();
  blob.reset();  // its pages are freed on the closing thread, not here
  for (int i = 0; i < 500 && IsBlobMemfd(fd); ++i)
    ::usleep(10'000);
  EXPECT_FALSE(IsBlobMemfd(fd));
}

TEST(Blob, ReadAllDoesNotDependOnTheFileOffset) {
  BlobPtr blob = MakeBlob("twice");
  ASSERT_NE(blob, nullptr);
  ASSERT_TRUE(blob->ReadAll().ok());
  StatusOr<std::string> again = blob->ReadAll();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, "twice");
}

}  // namespace
}  // namespace kc::store
