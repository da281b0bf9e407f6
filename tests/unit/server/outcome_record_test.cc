#include "server/outcome_record.h"

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
  StatusOr<OutcomeRecord> record = RecordOf(reply, "node-1");
  ASSERT_TRUE(record.ok()) << record.status().message();
  EXPECT_EQ(record->body, nullptr);
  StatusOr<HttpReply> back = ReplyOf(record->record, nullptr, "rid-2");
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

  StatusOr<OutcomeRecord> record = RecordOf(reply, "node-1");
  ASSERT_TRUE(record.ok()) << record.status().message();
  ASSERT_NE(record->body, nullptr);
  EXPECT_EQ(record->record["body_sha256"], Sha256Hex(head + tail));
  EXPECT_EQ(record->record["body_bytes"], head.size() + tail.size());
  EXPECT_EQ(record->body->sha256(), Sha256Hex(head + tail));
  EXPECT_FALSE(record->record.contains("body_base64"));

  StatusOr<HttpReply> back = ReplyOf(record->record, record->body, "rid");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_NE(back->pieces, nullptr);  // the blob's mapping, not a copy in `body`
  EXPECT_TRUE(back->body.empty());
  EXPECT_EQ(back->body_size(), head.size() + tail.size());
  EXPECT_EQ(BodyOf(*back), head + tail);
  EXPECT_EQ(back->content_type, "multipart/form-data; boundary=x");
}

TEST(OutcomeRecord, ARecordWhoseBlobIsMissingIsAnError) {
  const HttpReply reply = InPieces("a", std::string(kInlineBodyBytes + 1, 'b'));
  StatusOr<OutcomeRecord> record = RecordOf(reply, "node-1");
  ASSERT_TRUE(record.ok()) << record.status().message();
  StatusOr<HttpReply> back = ReplyOf(record->record, nullptr, "rid");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("missing"), std::string::npos);
}

}  // namespace
}  // namespace kc::server
