// Golden work messages: the wire form of cluster/work_message.h, pinned byte for byte as
// cluster_entry.cc wrote it by hand at 63fd9f6 (a nlohmann::json object, so keys in the order of
// their names). Nodes of the old and the new code share a cluster during a rolling upgrade: a
// change here is a change of the cluster's wire.
#include "cluster/work_message.h"

#include <string>

#include <gtest/gtest.h>

namespace kc::cluster {
namespace {

// With an Idempotency-Key (so a claim), a tenant and its weight, the program inline: 12 keys.
constexpr char kGoldenInline[] =
    R"({"claim":"5d41402a-bc4b-4a76-b971-9d911017c592","deadline_unix_ms":1764806460000,)"
    R"("entry_node":"node-a","entry_url":"http://127.0.0.1:8001",)"
    R"("key":"k-0123456789abcdef0123456789abcdef0123456789abcdef",)"
    R"("output_limit_bytes":1048576,)"
    R"("program":"{\"instructions\":[{\"op\":\"return\",\"values\":[]}],\"options\":{}}",)"
    R"("queued_unix_us":1764806400000123,"request_id":"8f14e45f-ceea-467a-9b3c-5f2d0c1a2b3c",)"
    R"("tenant":"acme","timeout_seconds":60.0,"weight":2.0})";

// The same request with a program past kInlineProgramBytes: by hash instead (the 13th key).
constexpr char kGoldenByHash[] =
    R"({"claim":"5d41402a-bc4b-4a76-b971-9d911017c592","deadline_unix_ms":1764806460000,)"
    R"("entry_node":"node-a","entry_url":"http://127.0.0.1:8001",)"
    R"("key":"k-0123456789abcdef0123456789abcdef0123456789abcdef",)"
    R"("output_limit_bytes":1048576,)"
    R"("program_sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",)"
    R"("queued_unix_us":1764806400000123,"request_id":"8f14e45f-ceea-467a-9b3c-5f2d0c1a2b3c",)"
    R"("tenant":"acme","timeout_seconds":60.0,"weight":2.0})";

// Without a key (no claim), from the anonymous tenant, a timeout of 2.5 s.
constexpr char kGoldenAnonymous[] =
    R"({"deadline_unix_ms":1764806402500,"entry_node":"node-a",)"
    R"("entry_url":"http://127.0.0.1:8001","key":"r-aa","output_limit_bytes":0,"program":"{}",)"
    R"("queued_unix_us":1764806400000123,"request_id":"8f14e45f-ceea-467a-9b3c-5f2d0c1a2b3c",)"
    R"("tenant":"","timeout_seconds":2.5,"weight":1.0})";

WorkMessage Keyed() {
  WorkMessage m{.key = "k-0123456789abcdef0123456789abcdef0123456789abcdef",
                .request_id = "8f14e45f-ceea-467a-9b3c-5f2d0c1a2b3c",
                .entry_node = "node-a",
                .entry_url = "http://127.0.0.1:8001",
                .deadline_unix_ms = 1764806460000,
                .timeout_seconds = 60,
                .output_limit_bytes = 1048576,
                .tenant = "acme",
                .weight = 2};
  m.claim = "5d41402a-bc4b-4a76-b971-9d911017c592";
  m.queued_unix_us = 1764806400000123;
  m.program = R"({"instructions":[{"op":"return","values":[]}],"options":{}})";
  return m;
}

WorkMessage Anonymous() {
  WorkMessage m{.key = "r-aa",
                .request_id = "8f14e45f-ceea-467a-9b3c-5f2d0c1a2b3c",
                .entry_node = "node-a",
                .entry_url = "http://127.0.0.1:8001",
                .deadline_unix_ms = 1764806402500,
                .timeout_seconds = 2.5,
                .output_limit_bytes = 0};
  m.queued_unix_us = 1764806400000123;
  m.program = "{}";
  return m;
}

void ExpectSame(const WorkMessage& a, const WorkMessage& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.entry_node, b.entry_node);
  EXPECT_EQ(a.entry_url, b.entry_url);
  EXPECT_EQ(a.deadline_unix_ms, b.deadline_unix_ms);
  EXPECT_EQ(a.timeout_seconds, b.timeout_seconds);
  EXPECT_EQ(a.output_limit_bytes, b.output_limit_bytes);
  EXPECT_EQ(a.tenant, b.tenant);
  EXPECT_EQ(a.weight, b.weight);
  EXPECT_EQ(a.claim, b.claim);
  EXPECT_EQ(a.retry, b.retry);
  EXPECT_EQ(a.queued_unix_us, b.queued_unix_us);
  EXPECT_EQ(a.program, b.program);
  EXPECT_EQ(a.program_sha256, b.program_sha256);
}

TEST(WorkMessage, EncodesTodaysMessageByteForByte) {
  EXPECT_EQ(Keyed().Encode(), kGoldenInline);
  WorkMessage by_hash = Keyed();
  by_hash.program.reset();
  by_hash.program_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  EXPECT_EQ(by_hash.Encode(), kGoldenByHash);
  EXPECT_EQ(Anonymous().Encode(), kGoldenAnonymous);
}

TEST(WorkMessage, DecodesTodaysMessage) {
  StatusOr<WorkMessage> m = WorkMessage::Decode(kGoldenInline);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectSame(*m, Keyed());

  m = WorkMessage::Decode(kGoldenByHash);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->program.has_value());
  EXPECT_EQ(m->program_sha256, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");

  m = WorkMessage::Decode(kGoldenAnonymous);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ExpectSame(*m, Anonymous());
  EXPECT_EQ(m->tenant, kAnonymousTenant);
  EXPECT_FALSE(m->claim.has_value());
}

TEST(WorkMessage, RoundTripsThroughItsWireForm) {
  for (const char* golden : {kGoldenInline, kGoldenByHash, kGoldenAnonymous}) {
    StatusOr<WorkMessage> m = WorkMessage::Decode(golden);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->Encode(), golden);
  }
  // Text that is no JSON string's (a program is checked JSON, but a tenant or an id need not
  // be UTF-8) is replaced, never thrown.
  WorkMessage odd = Anonymous();
  odd.request_id = "\xff";
  StatusOr<WorkMessage> back = WorkMessage::Decode(odd.Encode());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->request_id, "\xEF\xBF\xBD");
}

TEST(WorkMessage, ARetrysMessageSaysSoAndOthersLeaveItOut) {
  WorkMessage retry = Keyed();
  retry.retry = true;
  const std::string text = retry.Encode();
  std::string expected = kGoldenInline;
  expected.replace(expected.find(R"("tenant")"), 0, R"("retry":true,)");
  EXPECT_EQ(text, expected);
  StatusOr<WorkMessage> back = WorkMessage::Decode(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->retry);
  EXPECT_FALSE(WorkMessage::Decode(kGoldenInline)->retry);
  EXPECT_EQ(Keyed().Encode().find("retry"), std::string::npos);
}

TEST(WorkMessage, AnIntegerTimeoutAndWeightAreNumbersToo) {
  std::string text = kGoldenAnonymous;
  text.replace(text.find("2.5"), 3, "3");
  text.replace(text.find("1.0"), 3, "1");
  StatusOr<WorkMessage> m = WorkMessage::Decode(text);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->timeout_seconds, 3);
  EXPECT_EQ(m->weight, 1);
}

TEST(WorkMessage, KeysItDoesNotKnowAreIgnored) {
  std::string text = kGoldenInline;
  text.insert(1, R"("priority":"high",)");
  StatusOr<WorkMessage> m = WorkMessage::Decode(text);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->Encode(), kGoldenInline);
}

// A key left out of today's message.
std::string Without(const std::string& key) {
  std::string text = kGoldenInline;
  const size_t at = text.find("\"" + key + "\":");
  const size_t end = text.find(",\"", at);
  text.erase(at, end - at + 1);
  return text;
}

TEST(WorkMessage, AMissingKeyIsAnErrorNamingIt) {
  for (const char* key : {"key", "request_id", "entry_node", "entry_url", "deadline_unix_ms",
                          "timeout_seconds", "output_limit_bytes", "tenant"}) {
    StatusOr<WorkMessage> m = WorkMessage::Decode(Without(key));
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_EQ(m.status().code(), StatusCode::kInternal);
    EXPECT_EQ(m.status().message(), std::string("work message: field '") + key + "' is missing");
  }
  std::string no_weight = kGoldenInline;
  no_weight.erase(no_weight.find(",\"weight\""), std::string(",\"weight\":2.0").size());
  EXPECT_EQ(WorkMessage::Decode(no_weight).status().message(),
            "work message: field 'weight' is missing");
}

TEST(WorkMessage, OptionalKeysMayBeMissing) {
  StatusOr<WorkMessage> m = WorkMessage::Decode(Without("claim"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->claim.has_value());
  // A node older than 8600778 did not time the queue.
  m = WorkMessage::Decode(Without("queued_unix_us"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->queued_unix_us.has_value());
}

TEST(WorkMessage, AMistypedKeyIsAnErrorNamingIt) {
  std::string text = kGoldenInline;
  text.replace(text.find("1764806460000"), 13, "\"1764806460000\"");
  EXPECT_EQ(WorkMessage::Decode(text).status().message(),
            "work message: field 'deadline_unix_ms' is not an integer");

  text = kGoldenInline;
  text.replace(text.find("\"5d41402a-bc4b-4a76-b971-9d911017c592\""), 38, "7");
  EXPECT_EQ(WorkMessage::Decode(text).status().message(),
            "work message: field 'claim' is not a string");

  text = kGoldenInline;
  text.replace(text.find("60.0"), 4, "\"60\"");
  EXPECT_EQ(WorkMessage::Decode(text).status().message(),
            "work message: field 'timeout_seconds' is not a number");
}

TEST(WorkMessage, OneProgramExactly) {
  StatusOr<WorkMessage> m = WorkMessage::Decode(Without("program"));
  EXPECT_EQ(m.status().message(),
            "work message: field 'program' is missing, and so is 'program_sha256'");
  std::string both = kGoldenInline;
  both.insert(1, R"("program_sha256":"ab",)");
  EXPECT_EQ(WorkMessage::Decode(both).status().message(),
            "work message: field 'program_sha256' is set beside 'program' (a message carries "
            "one of them)");
}

TEST(WorkMessage, AnEmptyKeyOrNoObjectIsAnError) {
  std::string text = kGoldenAnonymous;
  text.replace(text.find("\"r-aa\""), 6, "\"\"");
  EXPECT_EQ(WorkMessage::Decode(text).status().message(), "work message: field 'key' is empty");
  EXPECT_EQ(WorkMessage::Decode("[1]").status().message(), "work message: not a JSON object");
  EXPECT_EQ(WorkMessage::Decode("{\"key\":").status().message(), "work message: not a JSON object");
}

TEST(TenantSubjectToken, TheAnonymousTenantIsAnonymousInSubjects) {
  EXPECT_EQ(TenantSubjectToken(kAnonymousTenant), "anonymous");
  EXPECT_EQ(TenantSubjectToken("acme"), "acme");
}

}  // namespace
}  // namespace kc::cluster
