#include "server/clustering/outcome_record.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "base/sha256.h"

namespace kc::server {
namespace {

std::string BodyOf(const HttpReply& reply) {
  if (reply.pieces == nullptr) return reply.body;
  return reply.pieces->encoded.Join();
}

// A reply whose body is pieces, as an outcome with results is built (outcome_reply.cc).
HttpReply InPieces(const std::string& head, const std::string& tail) {
  auto pieces = std::make_shared<PiecesBody>();
  pieces->result_json = head + tail;
  pieces->encoded.pieces = {std::string_view(pieces->result_json).substr(0, head.size()),
                            std::string_view(pieces->result_json).substr(head.size())};
  HttpReply reply{200, "multipart/form-data; boundary=x", "", "rid"};
  reply.pieces = std::move(pieces);
  return reply;
}

TEST(OutcomeRecord, ASmallBodyIsKeptInlineAndComesBackAsItWas) {
  HttpReply reply{200, "application/json", R"({"status":"COMPLETED"})", "rid"};
  reply.ending = RequestEnding::kCompleted;
  StatusOr<RecordedReply> record = RecordOf(reply, "node-1");
  ASSERT_TRUE(record.ok()) << record.status().message();
  EXPECT_EQ(record->body, nullptr);
  // Through the wire form, as the entry node reads it.
  StatusOr<cluster::OutcomeRecord> stored = cluster::OutcomeRecord::Decode(record->record.Encode());
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  StatusOr<HttpReply> back = ReplyOf(*stored, nullptr, "rid-2");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(BodyOf(*back), reply.body);
  EXPECT_EQ(back->request_id, "rid-2");
  EXPECT_EQ(back->ending, RequestEnding::kCompleted);
}

TEST(OutcomeRecord, ALargeBodyInPiecesBecomesOneBlobAndIsAnsweredFromItsMapping) {
  const std::string head = "--x\r\n" + std::string(100, 'h');
  std::string tail(kInlineBodyBytes + 4096, '\0');
  for (size_t i = 0; i < tail.size(); ++i)
    tail[i] = static_cast<char>(i * 7);
  const HttpReply reply = InPieces(head, tail);

  StatusOr<RecordedReply> record = RecordOf(reply, "node-1");
  ASSERT_TRUE(record.ok()) << record.status().message();
  ASSERT_NE(record->body, nullptr);
  ASSERT_TRUE(record->record.body_blob.has_value());
  EXPECT_EQ(record->record.body_blob->sha256, Sha256Hex(head + tail));
  EXPECT_EQ(record->record.body_blob->bytes, head.size() + tail.size());
  EXPECT_EQ(record->body->sha256(), Sha256Hex(head + tail));
  EXPECT_FALSE(record->record.body.has_value());

  StatusOr<cluster::OutcomeRecord> stored = cluster::OutcomeRecord::Decode(record->record.Encode());
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  StatusOr<HttpReply> back = ReplyOf(*stored, record->body, "rid");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_NE(back->pieces, nullptr);  // the blob's mapping, not a copy in `body`
  EXPECT_TRUE(back->body.empty());
  EXPECT_EQ(back->body_size(), head.size() + tail.size());
  EXPECT_EQ(BodyOf(*back), head + tail);
  EXPECT_EQ(back->content_type, "multipart/form-data; boundary=x");
}

TEST(OutcomeRecord, ARecordWhoseBlobIsMissingIsAnError) {
  const HttpReply reply = InPieces("a", std::string(kInlineBodyBytes + 1, 'b'));
  StatusOr<RecordedReply> record = RecordOf(reply, "node-1");
  ASSERT_TRUE(record.ok()) << record.status().message();
  StatusOr<HttpReply> back = ReplyOf(record->record, nullptr, "rid");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("missing"), std::string::npos);
}

}  // namespace
}  // namespace kc::server
