#include "server/execute/execute_ingest.h"

#include <array>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/sha256.h"

namespace kc::server {
namespace {

const std::string kBoundary = "XyZ";
const std::string kContentType = "multipart/form-data; boundary=" + kBoundary;

std::string Program(const std::string& sha) {
  return R"({"instructions":[{"op":"upload","id":"b","kind":"bytes","blob":")" + sha +
         R"("},{"op":"return","key":"b","value":{"$ref":"b"}}]})";
}

std::string Body(const std::string& blob, const std::string& name) {
  return "--" + kBoundary +
         "\r\nContent-Disposition: form-data; name=\"program\"\r\nContent-Type: "
         "application/json\r\n\r\n" +
         Program(name) + "\r\n--" + kBoundary +
         "\r\nContent-Disposition: form-data; name=\"blob:" + name +
         "\"\r\nContent-Type: application/octet-stream\r\n\r\n" + blob + "\r\n--" + kBoundary +
         "--\r\n";
}

// Feeds `body` in chunks of `size` round the slots as ReadBody does, each
// chunk taken a full ring ahead of its hashing and storing (the stages may
// lag that far), and overwritten once they are done (so a piece that
// outlives its chunk would show).
StatusOr<IngestedExecute> Ingest(const std::string& body, size_t size) {
  KC_ASSIGN_OR_RETURN(auto ingest, ExecuteIngest::Start(kContentType));
  constexpr int kSlots = BodyConsumer::kSlots;
  std::array<std::string, kSlots> chunks;
  std::vector<int> pending;
  auto finish = [&](int slot) -> Status {
    ingest->HashTaken(slot);
    KC_RETURN_IF_ERROR(ingest->StoreTaken(slot));
    chunks[slot].assign(chunks[slot].size(), '#');
    return Status::Ok();
  };
  int k = 0;
  for (size_t at = 0; at < body.size(); at += size, k = (k + 1) % kSlots) {
    if (pending.size() == kSlots) {
      KC_RETURN_IF_ERROR(finish(pending.front()));
      pending.erase(pending.begin());
    }
    chunks[k] = body.substr(at, size);
    KC_RETURN_IF_ERROR(ingest->Take(k, chunks[k]));
    pending.push_back(k);
  }
  for (int slot : pending)
    KC_RETURN_IF_ERROR(finish(slot));
  return ingest->Finish();
}

// Bytes that hold line breaks and near-delimiters, so that the stream holds
// some back at chunk ends.
std::string TrickyBlob() {
  std::string blob;
  for (int i = 0; i < 300; ++i)
    blob += "\r\n--XyZx" + std::to_string(i) + "\r\n-\n--Xy";
  return blob;
}

TEST(ExecuteIngest, AnyChunkingGivesTheSameBlob) {
  const std::string blob = TrickyBlob();
  const std::string body = Body(blob, Sha256Hex(blob));
  for (size_t size :
       {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{1000}, body.size()}) {
    StatusOr<IngestedExecute> ingested = Ingest(body, size);
    ASSERT_TRUE(ingested.ok()) << size << ": " << ingested.status().message();
    ASSERT_EQ(ingested->supplied.size(), 1u);
    StatusOr<std::string> bytes = ingested->supplied.at(Sha256Hex(blob))->ReadAll();
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(*bytes, blob) << "chunks of " << size;
    EXPECT_EQ(ingested->request.program_json, Program(Sha256Hex(blob)));
  }
}

TEST(ExecuteIngest, LargeBlobGoesIntoAMemfdWhole) {
  std::string blob(3 * store::BlobBuilder::kInlineBytes + 5, '\0');
  for (size_t i = 0; i < blob.size(); ++i)
    blob[i] = static_cast<char>(i * 131 % 251);
  StatusOr<IngestedExecute> ingested = Ingest(Body(blob, Sha256Hex(blob)), 1 << 20);
  ASSERT_TRUE(ingested.ok()) << ingested.status().message();
  const store::BlobPtr& stored = ingested->supplied.at(Sha256Hex(blob));
  EXPECT_EQ(stored->size(), blob.size());
  EXPECT_EQ(*stored->ReadAll(), blob);
}

TEST(ExecuteIngest, HashMismatchIsReportedAfterTheBody) {
  const std::string blob = TrickyBlob();
  const std::string claimed = Sha256Hex("other");
  StatusOr<IngestedExecute> ingested = Ingest(Body(blob, claimed), 5);
  ASSERT_FALSE(ingested.ok());
  EXPECT_EQ(ingested.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ingested.status().message(),
      "blob part 'blob:" + claimed + "' does not match its bytes (sha256 " + Sha256Hex(blob) + ")");
}

TEST(ExecuteIngest, WrongContentTypeIsRefusedAtStart) {
  EXPECT_FALSE(ExecuteIngest::Start("application/json").ok());
}

}  // namespace
}  // namespace kc::server
