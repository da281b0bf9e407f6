#include "base/memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

namespace kc {
namespace {

TEST(Memfd, SealedMemfdHoldsTheBytes) {
  StatusOr<UniqueFd> fd = MakeSealedMemfd("test", "sealed bytes");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  StatusOr<size_t> size = FdSize(fd->get());
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 12u);
  StatusOr<std::string> bytes = ReadWholeFd(fd->get());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "sealed bytes");
}

TEST(Memfd, SealedMemfdCannotBeWritten) {
  StatusOr<UniqueFd> fd = MakeSealedMemfd("test", "abc");
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(::write(fd->get(), "x", 1), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_FALSE(WriteAll(fd->get(), "more").ok());
}

TEST(Memfd, SealedMemfdCannotBeResizedOrMappedWritable) {
  StatusOr<UniqueFd> fd = MakeSealedMemfd("test", "abc");
  ASSERT_TRUE(fd.ok());
  EXPECT_NE(::ftruncate(fd->get(), 0), 0);
  EXPECT_NE(::ftruncate(fd->get(), 4096), 0);
  EXPECT_EQ(::mmap(nullptr, 3, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0), MAP_FAILED);
}

TEST(Memfd, SealsCannotBeRemovedOrAdded) {
  StatusOr<UniqueFd> fd = MakeSealedMemfd("test", "abc");
  ASSERT_TRUE(fd.ok());
  int seals = ::fcntl(fd->get(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE),
            F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
  EXPECT_NE(::fcntl(fd->get(), F_ADD_SEALS, F_SEAL_WRITE), 0);
}

TEST(Memfd, EmptySealedMemfdIsEmpty) {
  StatusOr<UniqueFd> fd = MakeSealedMemfd("test", "");
  ASSERT_TRUE(fd.ok());
  StatusOr<std::string> bytes = ReadWholeFd(fd->get());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "");
}

TEST(Memfd, PlainMemfdIsWritable) {
  StatusOr<UniqueFd> fd = MakeMemfd("test");
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(WriteAll(fd->get(), "hello ").ok());
  ASSERT_TRUE(WriteAll(fd->get(), "world").ok());
  StatusOr<std::string> bytes = ReadWholeFd(fd->get());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "hello world");
}

TEST(Memfd, ReadFdHeadRespectsMax) {
  StatusOr<UniqueFd> fd = MakeSealedMemfd("test", "0123456789");
  ASSERT_TRUE(fd.ok());
  StatusOr<std::string> head = ReadFdHead(fd->get(), 4);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, "0123");
  head = ReadFdHead(fd->get(), 0);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, "");
  head = ReadFdHead(fd->get(), 1000);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, "0123456789");
}

TEST(Memfd, ReadFdHeadDoesNotMoveTheOffset) {
  StatusOr<UniqueFd> fd = MakeMemfd("test");
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(WriteAll(fd->get(), "abcdef").ok());
  ASSERT_EQ(::lseek(fd->get(), 2, SEEK_SET), 2);
  StatusOr<std::string> head = ReadFdHead(fd->get(), 3);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, "abc");
  EXPECT_EQ(::lseek(fd->get(), 0, SEEK_CUR), 2);
}

TEST(Memfd, ReadWholeFdReadsLargeFiles) {
  std::string large(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < large.size(); ++i)
    large[i] = static_cast<char>(i * 31);
  StatusOr<UniqueFd> fd = MakeSealedMemfd("test", large);
  ASSERT_TRUE(fd.ok());
  StatusOr<std::string> bytes = ReadWholeFd(fd->get());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, large);
}

TEST(Memfd, FdSizeOfABadFdIsAnError) {
  StatusOr<size_t> size = FdSize(-1);
  EXPECT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace kc
