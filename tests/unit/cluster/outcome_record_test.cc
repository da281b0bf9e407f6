// Golden outcome records: the wire form of cluster/outcome_record.h, pinned byte for byte as
// server/outcome_record.cc and cluster_executor.cc wrote it by hand at 63fd9f6 (a nlohmann::json
// object, so keys in the order of their names). The entry node reads what another node stored:
// a change here is a change of the cluster's wire.
#include "cluster/outcome_record.h"

#include <string>

#include <gtest/gtest.h>

namespace kc::cluster {
namespace {

constexpr char kGoldenInline[] =
    R"({"body_base64":"eyJzdGF0dXMiOiJDT01QTEVURUQifQ==","content_type":"application/json",)"
    R"("ending":0,"error_kind":"","error_message":"","executed_by":"node-b",)"
    R"("headers":[["X-KCoral-Queue-Ms","3"]],"retry_after":false,"status":200})";

constexpr char kGoldenBlob[] =
    R"({"body_bytes":300000,)"
    R"("body_sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",)"
    R"("content_type":"application/json","ending":-1,"error_kind":"busy",)"
    R"("error_message":"the node's seats are full","executed_by":"node-b","headers":[],)"
    R"("holders":["http://127.0.0.1:8001","http://127.0.0.1:8002"],"retry_after":true,)"
    R"("status":503})";

OutcomeRecord Inline() {
  OutcomeRecord r;
  r.status = 200;
  r.content_type = "application/json";
  r.headers = {{"X-KCoral-Queue-Ms", "3"}};
  r.ending = 0;
  r.executed_by = "node-b";
  r.body = R"({"status":"COMPLETED"})";
  return r;
}

OutcomeRecord InBlob() {
  OutcomeRecord r;
  r.status = 503;
  r.content_type = "application/json";
  r.retry_after = true;
  r.error_kind = "busy";
  r.error_message = "the node's seats are full";
  r.executed_by = "node-b";
  r.body_blob = OutcomeBlob{"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                            300000,
                            {"http://127.0.0.1:8001", "http://127.0.0.1:8002"}};
  return r;
}

TEST(OutcomeRecord, EncodesTodaysRecordByteForByte) {
  EXPECT_EQ(Inline().Encode(), kGoldenInline);
  EXPECT_EQ(InBlob().Encode(), kGoldenBlob);
}

TEST(OutcomeRecord, DecodesTodaysRecord) {
  StatusOr<OutcomeRecord> r = OutcomeRecord::Decode(kGoldenInline);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->content_type, "application/json");
  EXPECT_FALSE(r->retry_after);
  EXPECT_EQ(r->headers, Inline().headers);
  EXPECT_EQ(r->ending, 0);
  EXPECT_EQ(r->executed_by, "node-b");
  EXPECT_EQ(r->body, R"({"status":"COMPLETED"})");
  EXPECT_FALSE(r->body_blob.has_value());

  r = OutcomeRecord::Decode(kGoldenBlob);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 503);
  EXPECT_TRUE(r->retry_after);
  EXPECT_EQ(r->ending, -1);
  EXPECT_EQ(r->error_kind, "busy");
  EXPECT_EQ(r->error_message, "the node's seats are full");
  EXPECT_FALSE(r->body.has_value());
  ASSERT_TRUE(r->body_blob.has_value());
  EXPECT_EQ(r->body_blob->sha256, InBlob().body_blob->sha256);
  EXPECT_EQ(r->body_blob->bytes, 300000u);
  EXPECT_EQ(r->body_blob->holders, InBlob().body_blob->holders);
}

TEST(OutcomeRecord, RoundTripsThroughItsWireForm) {
  for (const char* golden : {kGoldenInline, kGoldenBlob}) {
    StatusOr<OutcomeRecord> r = OutcomeRecord::Decode(golden);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->Encode(), golden);
  }
  // Any bytes inline, of every length modulo 3 (base64's padding).
  for (std::string body : {std::string(), std::string("a"), std::string("ab"),
                           std::string("\0\xff\x80", 3), std::string(1000, '\x01')}) {
    OutcomeRecord r = Inline();
    r.body = body;
    StatusOr<OutcomeRecord> back = OutcomeRecord::Decode(r.Encode());
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->body, body);
  }
}

TEST(OutcomeRecord, AMissingOrMistypedKeyIsAnErrorNamingIt) {
  std::string text = kGoldenInline;
  text.erase(text.find(",\"status\":200"), std::string(",\"status\":200").size());
  StatusOr<OutcomeRecord> r = OutcomeRecord::Decode(text);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message(), "outcome record: field 'status' is missing");

  text = kGoldenInline;
  text.replace(text.find("[[\"X-KCoral-Queue-Ms\",\"3\"]]"), 27, "[[\"X-KCoral-Queue-Ms\",3]]");
  EXPECT_EQ(OutcomeRecord::Decode(text).status().message(),
            "outcome record: field 'headers' is not an array of string pairs");

  text = kGoldenBlob;
  text.replace(text.find("[\"http://127.0.0.1:8001\""), 1, "[7,");
  EXPECT_EQ(OutcomeRecord::Decode(text).status().message(),
            "outcome record: field 'holders' is not an array of strings");

  text = kGoldenBlob;
  text.erase(text.find("\"holders\""), text.find("\"retry_after\"") - text.find("\"holders\""));
  EXPECT_EQ(OutcomeRecord::Decode(text).status().message(),
            "outcome record: field 'holders' is missing");
}

TEST(OutcomeRecord, OneBodyExactly) {
  std::string text = kGoldenInline;
  text.erase(1, text.find("\"content_type\"") - 1);
  EXPECT_EQ(OutcomeRecord::Decode(text).status().message(),
            "outcome record: field 'body_base64' is missing, and so is 'body_sha256'");
  text = kGoldenInline;
  text.insert(1, R"("body_sha256":"ab",)");
  EXPECT_EQ(OutcomeRecord::Decode(text).status().message(),
            "outcome record: field 'body_sha256' is set beside 'body_base64' (a record carries "
            "one body)");
  text = kGoldenInline;
  text.replace(text.find("eyJz"), 4, "eyJ");
  EXPECT_EQ(OutcomeRecord::Decode(text).status().message(),
            "outcome record: malformed base64 body");
}

}  // namespace
}  // namespace kc::cluster
