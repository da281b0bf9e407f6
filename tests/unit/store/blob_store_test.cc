#include "store/blob_store.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "../temp_dir.h"
#include "base/sha256.h"

namespace kc::store {
namespace {

using protocol::BlobReference;
using protocol::Program;

// Builds a request by hand (no parser): references in first-use order plus
// the supplied blobs.
class RequestBuilder {
 public:
  RequestBuilder& FileBlob(const std::string& bytes) {
    return Reference(bytes, /*file=*/true, /*memory=*/false);
  }
  RequestBuilder& MemoryBlob(const std::string& bytes) {
    return Reference(bytes, /*file=*/false, /*memory=*/true);
  }
  RequestBuilder& SharedBlob(const std::string& bytes) {
    return Reference(bytes, /*file=*/true, /*memory=*/true);
  }
  RequestBuilder& TensorBlob(const std::string& bytes, uint64_t expected, std::string id) {
    Reference(bytes, /*file=*/false, /*memory=*/true);
    program_.blobs.back().tensor_bytes = expected;
    program_.blobs.back().tensor_upload_id = std::move(id);
    return *this;
  }
  RequestBuilder& Supply(const std::string& bytes) {
    StatusOr<BlobPtr> blob = Blob::FromBytes(Sha256Hex(bytes), bytes);
    EXPECT_TRUE(blob.ok());
    if (blob.ok()) supplied_.emplace((*blob)->sha256(), *blob);
    return *this;
  }
  StatusOr<Resolution> ResolveIn(BlobStore& store) const {
    return store.Resolve(program_, supplied_);
  }

 private:
  RequestBuilder& Reference(const std::string& bytes, bool file, bool memory) {
    BlobReference reference;
    reference.sha256 = Sha256Hex(bytes);
    reference.used_by_file = file;
    reference.used_by_memory = memory;
    program_.blobs.push_back(reference);
    return *this;
  }

  Program program_;
  std::unordered_map<std::string, BlobPtr> supplied_;
};

class BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(temp_.path().empty()); }

  BlobStoreOptions Options() const {
    BlobStoreOptions options;
    options.memory_capacity_bytes = 1 << 20;
    options.disk_dir = temp_.path() / "files";
    options.disk_capacity_bytes = 1 << 20;
    return options;
  }

  kc::testing::TempDir temp_;
};

std::string BytesOf(const BlobPtr& blob) {
  StatusOr<std::string> bytes = blob->ReadAll();
  return bytes.ok() ? *bytes : "<unreadable>";
}

TEST_F(BlobStoreTest, SuppliedBlobWarmsBothTiers) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.SharedBlob("both").Supply("both");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_TRUE(resolution.ok()) << resolution.status().message();
  EXPECT_TRUE(resolution->missing.empty());
  ASSERT_EQ(resolution->blobs.size(), 1u);
  EXPECT_EQ(BytesOf(resolution->blobs.at(Sha256Hex("both"))), "both");
  EXPECT_NE(store.memory().Get(Sha256Hex("both")), nullptr);
  EXPECT_NE(store.disk().Get(Sha256Hex("both")), nullptr);
}

TEST_F(BlobStoreTest, FileBlobIsStoredOnlyOnDisk) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.FileBlob("file").Supply("file");
  ASSERT_TRUE(builder.ResolveIn(store).ok());
  EXPECT_NE(store.disk().Get(Sha256Hex("file")), nullptr);
  EXPECT_EQ(store.memory().Get(Sha256Hex("file")), nullptr);
}

TEST_F(BlobStoreTest, MemoryBlobIsStoredOnlyInMemory) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.MemoryBlob("tensor").Supply("tensor");
  ASSERT_TRUE(builder.ResolveIn(store).ok());
  EXPECT_NE(store.memory().Get(Sha256Hex("tensor")), nullptr);
  EXPECT_EQ(store.disk().Get(Sha256Hex("tensor")), nullptr);
}

TEST_F(BlobStoreTest, RetryWithoutBytesHitsTheCaches) {
  BlobStore store(Options());
  RequestBuilder first;
  first.FileBlob("f").MemoryBlob("m").Supply("f").Supply("m");
  ASSERT_TRUE(first.ResolveIn(store).ok());

  RequestBuilder second;
  second.FileBlob("f").MemoryBlob("m");
  StatusOr<Resolution> resolution = second.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_TRUE(resolution->missing.empty());
  EXPECT_EQ(BytesOf(resolution->blobs.at(Sha256Hex("f"))), "f");
  EXPECT_EQ(BytesOf(resolution->blobs.at(Sha256Hex("m"))), "m");
}

TEST_F(BlobStoreTest, MissingBlobsAreInFirstReferenceOrder) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.MemoryBlob("z").FileBlob("a").MemoryBlob("present").SharedBlob("m").Supply("present");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_EQ(resolution->missing,
            (std::vector<std::string>{Sha256Hex("z"), Sha256Hex("a"), Sha256Hex("m")}));
  EXPECT_EQ(resolution->blobs.size(), 1u);
  EXPECT_TRUE(resolution->blobs.contains(Sha256Hex("present")));
}

// A blob sent ahead (POST /blobs) waits in memory, whatever it is used for.
TEST_F(BlobStoreTest, FileBlobIsServedFromTheMemoryTierAndKeptOnDisk) {
  BlobStore store(Options());
  StatusOr<BlobPtr> blob = Blob::FromBytes(Sha256Hex("only in memory"), "only in memory");
  ASSERT_TRUE(blob.ok());
  store.Add(*blob);
  EXPECT_TRUE(store.Contains(Sha256Hex("only in memory")));
  RequestBuilder builder;
  builder.FileBlob("only in memory");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_TRUE(resolution->missing.empty());
  EXPECT_TRUE(store.disk().Contains(Sha256Hex("only in memory")));
}

TEST_F(BlobStoreTest, MemoryBlobIsServedFromTheDiskTier) {
  BlobStore store(Options());
  RequestBuilder first;
  first.FileBlob("on disk").Supply("on disk");
  ASSERT_TRUE(first.ResolveIn(store).ok());
  EXPECT_FALSE(store.memory().Get(Sha256Hex("on disk")));
  RequestBuilder second;
  second.MemoryBlob("on disk");
  StatusOr<Resolution> resolution = second.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_TRUE(resolution->missing.empty());
  EXPECT_EQ(BytesOf(resolution->blobs.at(Sha256Hex("on disk"))), "on disk");
}

TEST_F(BlobStoreTest, BlobUsedByBothKindsIsServedFromEitherTier) {
  BlobStore store(Options());
  StatusOr<BlobPtr> blob = Blob::FromBytes(Sha256Hex("either"), "either");
  ASSERT_TRUE(blob.ok());
  store.memory().Put(*blob);
  RequestBuilder builder;
  builder.SharedBlob("either");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_TRUE(resolution->missing.empty());
}

TEST_F(BlobStoreTest, PartiallySuppliedRetryStillWarmsTheCache) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.MemoryBlob("sent").MemoryBlob("not sent").Supply("sent");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_EQ(resolution->missing, std::vector<std::string>{Sha256Hex("not sent")});
  EXPECT_NE(store.memory().Get(Sha256Hex("sent")), nullptr);
}

TEST_F(BlobStoreTest, TensorLengthMismatchIsInvalidArgument) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.TensorBlob("12345678", 16, "weights").Supply("12345678");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_FALSE(resolution.ok());
  EXPECT_EQ(resolution.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(resolution.status().message(), "tensor upload 'weights' expects 16 bytes, got 8");
}

TEST_F(BlobStoreTest, TensorLengthMismatchIsInvalidArgumentEvenWithMissingBlobs) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.MemoryBlob("missing").TensorBlob("1234", 8, "x").Supply("1234");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_FALSE(resolution.ok());
  EXPECT_EQ(resolution.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(resolution.status().message(), "tensor upload 'x' expects 8 bytes, got 4");
}

TEST_F(BlobStoreTest, CachedTensorWithTheWrongLengthIsInvalidArgument) {
  BlobStore store(Options());
  RequestBuilder first;
  first.MemoryBlob("1234").Supply("1234");
  ASSERT_TRUE(first.ResolveIn(store).ok());
  RequestBuilder second;
  second.TensorBlob("1234", 2, "t");
  StatusOr<Resolution> resolution = second.ResolveIn(store);
  ASSERT_FALSE(resolution.ok());
  EXPECT_EQ(resolution.status().message(), "tensor upload 't' expects 2 bytes, got 4");
}

TEST_F(BlobStoreTest, TensorOfTheRightLengthResolves) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.TensorBlob("12345678", 8, "t").Supply("12345678");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_TRUE(resolution->missing.empty());
}

TEST_F(BlobStoreTest, MissingTensorIsNotALengthError) {
  BlobStore store(Options());
  RequestBuilder builder;
  builder.TensorBlob("absent", 100, "t");
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_EQ(resolution->missing, std::vector<std::string>{Sha256Hex("absent")});
}

TEST_F(BlobStoreTest, DisabledDiskTierStillServesSuppliedFileBytes) {
  BlobStoreOptions options = Options();
  options.disk_dir.clear();
  BlobStore store(options);
  RequestBuilder first;
  first.FileBlob("f").Supply("f");
  StatusOr<Resolution> resolution = first.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_TRUE(resolution->missing.empty());

  RequestBuilder second;
  second.FileBlob("f");
  resolution = second.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  EXPECT_EQ(resolution->missing, std::vector<std::string>{Sha256Hex("f")});
}

TEST_F(BlobStoreTest, ResolvedBlobsOutliveEviction) {
  BlobStoreOptions options = Options();
  options.memory_capacity_bytes = 40;
  BlobStore store(options);
  RequestBuilder builder;
  builder.MemoryBlob(std::string(10, 'k')).Supply(std::string(10, 'k'));
  StatusOr<Resolution> resolution = builder.ResolveIn(store);
  ASSERT_TRUE(resolution.ok());
  for (char tag = 'a'; tag <= 'e'; ++tag) {
    StatusOr<BlobPtr> other =
        Blob::FromBytes(Sha256Hex(std::string(10, tag)), std::string(10, tag));
    ASSERT_TRUE(other.ok());
    store.memory().Put(*other);
  }
  EXPECT_EQ(store.memory().Get(Sha256Hex(std::string(10, 'k'))), nullptr);
  EXPECT_EQ(BytesOf(resolution->blobs.at(Sha256Hex(std::string(10, 'k')))), std::string(10, 'k'));
}

}  // namespace
}  // namespace kc::store
