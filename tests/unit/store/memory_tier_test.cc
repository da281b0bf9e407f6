#include "store/memory_tier.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/sha256.h"
#include "make_blob.h"

namespace kc::store {
namespace {

using testing::MakeBlob;

// Ten bytes that differ by `tag`, so each blob has its own hash.
BlobPtr TenBytes(char tag) {
  return MakeBlob(std::string(10, tag));
}

TEST(MemoryTier, GetReturnsWhatPutStored) {
  MemoryTier tier(1000);
  BlobPtr blob = TenBytes('a');
  tier.Put(blob);
  EXPECT_EQ(tier.Get(blob->sha256()), blob);
  EXPECT_EQ(tier.count(), 1u);
  EXPECT_EQ(tier.size_bytes(), 10u);
}

TEST(MemoryTier, UnknownHashIsAMiss) {
  MemoryTier tier(1000);
  EXPECT_EQ(tier.Get(Sha256Hex("nothing")), nullptr);
}

TEST(MemoryTier, LeastRecentlyUsedIsEvictedFirst) {
  MemoryTier tier(40);
  BlobPtr a = TenBytes('a'), b = TenBytes('b'), c = TenBytes('c'), d = TenBytes('d');
  tier.Put(a);
  tier.Put(b);
  tier.Put(c);
  tier.Put(d);
  ASSERT_NE(tier.Get(a->sha256()), nullptr);  // a is now the most recent; b the least
  tier.Put(TenBytes('e'));
  EXPECT_EQ(tier.Get(b->sha256()), nullptr);
  EXPECT_NE(tier.Get(a->sha256()), nullptr);
  EXPECT_NE(tier.Get(c->sha256()), nullptr);
  EXPECT_NE(tier.Get(d->sha256()), nullptr);
  EXPECT_EQ(tier.size_bytes(), 40u);
  EXPECT_EQ(tier.count(), 4u);
}

TEST(MemoryTier, PutOfAnExistingHashRefreshesRecencyWithoutCountingTwice) {
  MemoryTier tier(40);
  BlobPtr a = TenBytes('a'), b = TenBytes('b');
  tier.Put(a);
  tier.Put(b);
  tier.Put(TenBytes('c'));
  tier.Put(TenBytes('d'));
  tier.Put(MakeBlob(std::string(10, 'a')));  // same hash, new object: refreshes a
  EXPECT_EQ(tier.size_bytes(), 40u);
  EXPECT_EQ(tier.count(), 4u);
  tier.Put(TenBytes('e'));
  EXPECT_NE(tier.Get(a->sha256()), nullptr);
  EXPECT_EQ(tier.Get(b->sha256()), nullptr);
}

TEST(MemoryTier, BlobLargerThanAQuarterOfCapacityIsNotStored) {
  MemoryTier tier(40);
  BlobPtr too_big = MakeBlob(std::string(11, 'x'));
  tier.Put(too_big);
  EXPECT_EQ(tier.Get(too_big->sha256()), nullptr);
  EXPECT_EQ(tier.size_bytes(), 0u);
  BlobPtr quarter = MakeBlob(std::string(10, 'x'));
  tier.Put(quarter);
  EXPECT_NE(tier.Get(quarter->sha256()), nullptr);
}

TEST(MemoryTier, ZeroCapacityStoresNothing) {
  MemoryTier tier(0);
  BlobPtr blob = TenBytes('a');
  tier.Put(blob);
  EXPECT_EQ(tier.Get(blob->sha256()), nullptr);
  EXPECT_EQ(tier.count(), 0u);
}

TEST(MemoryTier, EvictionKeepsTotalWithinCapacity) {
  MemoryTier tier(100);
  for (char tag = 'a'; tag <= 'z'; ++tag) {
    tier.Put(MakeBlob(std::string(7 + tag % 13, tag)));
    EXPECT_LE(tier.size_bytes(), 100u);
  }
}

TEST(MemoryTier, EvictedBlobStaysValidForItsHolder) {
  MemoryTier tier(40);
  BlobPtr held = TenBytes('a');
  tier.Put(held);
  held = tier.Get(held->sha256());
  for (char tag = 'b'; tag <= 'f'; ++tag)
    tier.Put(TenBytes(tag));
  EXPECT_EQ(tier.Get(held->sha256()), nullptr);
  StatusOr<std::string> bytes = held->ReadAll();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, std::string(10, 'a'));
}

TEST(MemoryTier, NullBlobIsIgnored) {
  MemoryTier tier(40);
  tier.Put(nullptr);
  EXPECT_EQ(tier.count(), 0u);
}

TEST(MemoryTier, ConcurrentPutsAndGetsStayWithinCapacity) {
  MemoryTier tier(400);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tier, t] {
      for (int i = 0; i < 200; ++i) {
        BlobPtr blob = MakeBlob(std::string(1 + i % 100, static_cast<char>('a' + t)));
        tier.Put(blob);
        tier.Get(blob->sha256());
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  EXPECT_LE(tier.size_bytes(), 400u);
}

}  // namespace
}  // namespace kc::store
