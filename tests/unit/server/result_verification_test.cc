#include "server/execute/result_verification.h"

#include <string>

#include <gtest/gtest.h>

#include "base/hmac_sha256.h"
#include "base/sha256.h"
#include "protocol/json_reader.h"
#include "protocol/json_writer.h"

namespace kc::server {
namespace {

using protocol::JsonValue;

const std::string kKey(32, 'k');
constexpr char kSource[] = "def main():\n    pass\n";

protocol::Program Program() {
  StatusOr<protocol::Program> program = protocol::ParseProgram(
      R"({"instructions":[{"op":"upload","id":"m","kind":"module","source":"def main():\n    pass\n"},)"
      R"({"op":"upload","id":"b","kind":"bytes","blob":")" +
      std::string(64, 'a') +
      R"("},{"op":"get_function","id":"f","module":{"$ref":"m"},"name":"main"},)"
      R"({"op":"run","id":"timing","fn":{"$ref":"f"}},)"
      R"({"op":"return","key":"out","value":{"$ref":"timing"}}]})");
  EXPECT_TRUE(program.ok()) << program.status().message();
  return *std::move(program);
}

// A record as the worker's sealer writes it: wire nodes, compact. `extra_integrity`: more
// members of integrity, each with a leading comma.
std::string Record(std::string_view request_id = "rid", std::string_view flags = "",
                   double median = 0.25, std::string_view extra_integrity = "") {
  return R"({"type":"object","value":{"latency_ms_median":{"type":"number","value":)" +
         std::to_string(median) +
         R"(},"repeat":{"type":"integer","value":10},"integrity":{"type":"object","value":{)"
         R"("flags":{"type":"array","value":[)" +
         std::string(flags) + R"(]},"request_id":{"type":"string","value":")" +
         std::string(request_id) + R"("},"instruction_index":{"type":"integer","value":3})" +
         std::string(extra_integrity) + "}}}}";
}

// What the GPU timer reports about the machine (src/native/span_findings.h): not evidence.
constexpr char kConditions[] =
    R"(,"conditions":{"type":"array","value":[{"type":"string","value":)"
    R"("throttle reason \"sw power cap\" active at the start and the end"}]})";

std::string StringNode(std::string_view text) {
  std::string out;
  protocol::JsonWriter(out).String(text);
  return R"({"type":"string","value":)" + out + "}";
}

// What user code returns: the record's fields plus record and seal inside integrity.
std::string Returned(const std::string& record, const std::string& seal, double median = 0.25,
                     std::string_view extra_integrity = "") {
  return R"({"out":{"type":"object","value":{"latency_ms_median":{"type":"number","value":)" +
         std::to_string(median) +
         R"(},"repeat":{"type":"integer","value":10},"integrity":{"type":"object","value":{)"
         R"("flags":{"type":"array","value":[]},"request_id":{"type":"string","value":"rid"},)"
         R"("instruction_index":{"type":"integer","value":3},"record":)" +
         StringNode(record) + R"(,"seal":)" + StringNode(seal) + std::string(extra_integrity) +
         "}}}}}";
}

class ResultVerificationTest : public ::testing::Test {
 public:
  JsonValue Verify(const std::string& results_json, std::string_view key = kKey,
                   std::vector<std::string> server_conditions = {}) {
    StatusOr<JsonValue> results = protocol::ReadJson(results_json);
    EXPECT_TRUE(results.ok()) << results.status().message();
    VerifySealedResults(*results, {"rid", key, &program_, std::move(server_conditions)});
    return *std::move(results);
  }

  static const JsonValue& Field(const JsonValue& results, std::string_view key) {
    const JsonValue* integrity =
        results.Find("out")->Find("value")->Find("integrity")->Find("value")->Find(key);
    EXPECT_NE(integrity, nullptr) << key;
    return *integrity->Find("value");
  }

  static bool Has(const JsonValue& results, std::string_view key) {
    return results.Find("out")->Find("value")->Find("integrity")->Find("value")->Find(key) !=
           nullptr;
  }

 private:
  protocol::Program program_ = Program();
};

TEST_F(ResultVerificationTest, SealedRecordIsVerifiedTrustedWithProvenance) {
  const std::string record = Record();
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record)));
  EXPECT_TRUE(Field(results, "verified").boolean());
  EXPECT_TRUE(Field(results, "trusted").boolean());
  EXPECT_FALSE(Field(results, "altered_after_timing").boolean());
  EXPECT_FALSE(Has(results, "record"));
  EXPECT_FALSE(Has(results, "seal"));
  const JsonValue& provenance = Field(results, "provenance");
  EXPECT_EQ(*provenance.Find("instruction_id")->Find("value"), JsonValue::String("timing"));
  const JsonValue& uploads = *provenance.Find("uploads")->Find("value");
  EXPECT_EQ(*uploads.Find("m")->Find("value"), JsonValue::String(Sha256Hex(kSource)));
  EXPECT_EQ(*uploads.Find("b")->Find("value"), JsonValue::String(std::string(64, 'a')));
}

TEST_F(ResultVerificationTest, EditedNumberIsRestoredFromTheRecordAndReportedAltered) {
  const std::string record = Record();
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record), /*median=*/0.001));
  EXPECT_TRUE(Field(results, "verified").boolean());
  EXPECT_TRUE(Field(results, "altered_after_timing").boolean());
  EXPECT_EQ(
      results.Find("out")->Find("value")->Find("latency_ms_median")->Find("value")->AsDouble(),
      0.25);
}

TEST_F(ResultVerificationTest, VerifiedAddedByUserCodeIsNotAnAlteration) {
  const std::string record = Record();
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record), 0.25,
                                      R"(,"verified":{"type":"boolean","value":true})"));
  EXPECT_TRUE(Field(results, "verified").boolean());
  EXPECT_FALSE(Field(results, "altered_after_timing").boolean());
}

TEST_F(ResultVerificationTest, FlagsMakeAVerifiedRecordUntrusted) {
  const std::string record = Record("rid", R"({"type":"string","value":"patched: math.fsum"})");
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record)));
  EXPECT_TRUE(Field(results, "verified").boolean());
  EXPECT_FALSE(Field(results, "trusted").boolean());
}

// A grader pays on `trusted`: an output the call produced that was not checked (a cached
// tensor returned as a constant, a declared-unverifiable output) is as untrusted as a flag.
TEST_F(ResultVerificationTest, AnUncheckedOutputMakesAVerifiedRecordUntrusted) {
  constexpr char kUnchecked[] =
      R"(,"outputs_unchecked":{"type":"array","value":[{"type":"string","value":)"
      R"("return[0] (returned unchanged on every call) is not checked"}]})";
  const std::string record = Record("rid", "", 0.25, kUnchecked);
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record), 0.25, kUnchecked));
  EXPECT_TRUE(Field(results, "verified").boolean());
  EXPECT_FALSE(Field(results, "trusted").boolean());
}

TEST_F(ResultVerificationTest, AnEmptyUncheckedListLeavesARecordTrusted) {
  constexpr char kNothingUnchecked[] = R"(,"outputs_unchecked":{"type":"array","value":[]})";
  const std::string record = Record("rid", "", 0.25, kNothingUnchecked);
  JsonValue results =
      Verify(Returned(record, HmacSha256Hex(kKey, record), 0.25, kNothingUnchecked));
  EXPECT_TRUE(Field(results, "trusted").boolean());
}

TEST_F(ResultVerificationTest, ConditionsAloneLeaveARecordTrustedAndReachTheClientUnchanged) {
  const std::string record = Record("rid", "", 0.25, kConditions);
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record), 0.25, kConditions));
  EXPECT_TRUE(Field(results, "verified").boolean());
  EXPECT_TRUE(Field(results, "trusted").boolean());
  EXPECT_FALSE(Field(results, "altered_after_timing").boolean());
  const JsonValue& conditions = Field(results, "conditions");
  ASSERT_TRUE(conditions.is_array());
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(*conditions.array()[0].Find("value"),
            JsonValue::String("throttle reason \"sw power cap\" active at the start and the end"));
}

TEST_F(ResultVerificationTest, AFlagBesideConditionsMakesARecordUntrusted) {
  const std::string record =
      Record("rid", R"({"type":"string","value":"application clocks changed during the span"})",
             0.25, kConditions);
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record), 0.25, kConditions));
  EXPECT_TRUE(Field(results, "verified").boolean());
  EXPECT_FALSE(Field(results, "trusted").boolean());
  EXPECT_EQ(Field(results, "conditions").size(), 1u);
}

TEST_F(ResultVerificationTest, TheServersConditionsAreAddedAndLeaveItTrusted) {
  const std::string record = Record("rid", "", 0.25, kConditions);
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record), 0.25, kConditions), kKey,
                             {"gpu: this server's own house-keeping ran beside"});
  EXPECT_TRUE(Field(results, "trusted").boolean());
  EXPECT_FALSE(Field(results, "altered_after_timing").boolean());  // the server's, not user code's
  const JsonValue& conditions = Field(results, "conditions");
  ASSERT_EQ(conditions.size(), 2u);
  EXPECT_EQ(*conditions.array()[1].Find("value"),
            JsonValue::String("gpu: this server's own house-keeping ran beside"));
}

TEST_F(ResultVerificationTest, AConditionsMemberIsMadeForTheServersConditions) {
  const std::string record = Record();  // no conditions member
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record)), kKey,
                             {"gpu: a process outside this server held a CUDA context"});
  EXPECT_TRUE(Field(results, "verified").boolean());
  EXPECT_TRUE(Field(results, "trusted").boolean());
  EXPECT_EQ(Field(results, "flags").size(), 0u);
  EXPECT_EQ(Field(results, "conditions").size(), 1u);
}

TEST_F(ResultVerificationTest, TheServersConditionsNeverReachAnUnsealedNode) {
  JsonValue results =
      Verify(R"({"out":{"type":"object","value":{"integrity":{"type":"object","value":{}}}}})",
             kKey, {"gpu: a process outside this server held a CUDA context"});
  EXPECT_FALSE(Field(results, "verified").boolean());
  EXPECT_FALSE(Has(results, "conditions"));
}

TEST_F(ResultVerificationTest, HandMadeVerifiedTrueHasNoSeal) {
  JsonValue results = Verify(
      R"({"out":{"type":"object","value":{"latency_ms_median":{"type":"number","value":0.001},)"
      R"("integrity":{"type":"object","value":{"verified":{"type":"boolean","value":true},)"
      R"("trusted":{"type":"boolean","value":true},)"
      R"("provenance":{"type":"string","value":"forged"},)"
      R"("altered_after_timing":{"type":"boolean","value":false}}}}}})");
  EXPECT_FALSE(Field(results, "verified").boolean());
  EXPECT_FALSE(Field(results, "trusted").boolean());
  EXPECT_EQ(Field(results, "reason").string().rfind("no seal", 0), 0u);
  EXPECT_FALSE(Has(results, "provenance"));  // only the server writes these
  EXPECT_FALSE(Has(results, "altered_after_timing"));
}

TEST_F(ResultVerificationTest, SealUnderAnotherKeyIsBad) {
  const std::string record = Record();
  JsonValue results = Verify(Returned(record, HmacSha256Hex(std::string(32, 'x'), record)));
  EXPECT_FALSE(Field(results, "verified").boolean());
  EXPECT_EQ(Field(results, "reason").string().rfind("bad seal", 0), 0u);
}

TEST_F(ResultVerificationTest, RecordEditedAfterSealingIsBad) {
  const std::string seal = HmacSha256Hex(kKey, Record());
  JsonValue results = Verify(Returned(Record("rid", "", 0.001), seal));
  EXPECT_EQ(Field(results, "reason").string().rfind("bad seal", 0), 0u);
}

TEST_F(ResultVerificationTest, WorkerWithoutKeyVerifiesNothing) {
  const std::string record = Record();
  JsonValue results = Verify(Returned(record, HmacSha256Hex("", record)), "");
  EXPECT_EQ(Field(results, "reason").string().rfind("bad seal", 0), 0u);
}

TEST_F(ResultVerificationTest, AnotherRequestsRecordIsRefused) {
  const std::string record = Record("earlier-request");
  JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record)));
  EXPECT_FALSE(Field(results, "verified").boolean());
  EXPECT_EQ(Field(results, "reason").string().rfind("another request's record", 0), 0u);
  EXPECT_NE(Field(results, "reason").string().find("earlier-request"), std::string::npos);
}

TEST_F(ResultVerificationTest, SealedTextThatIsNoValueTreeIsUnreadable) {
  for (const std::string& record : {std::string("not json"), std::string(R"({"type":"bogus"})"),
                                    std::string(R"({"type":"object","value":{}})")}) {
    JsonValue results = Verify(Returned(record, HmacSha256Hex(kKey, record)));
    EXPECT_EQ(Field(results, "reason").string().rfind("unreadable record", 0), 0u) << record;
  }
}

TEST_F(ResultVerificationTest, IntegrityThatIsNoObjectIsRefused) {
  JsonValue results = Verify(
      R"({"out":{"type":"object","value":{"integrity":{"type":"string","value":"verified"}}}})");
  EXPECT_FALSE(Field(results, "verified").boolean());
}

TEST_F(ResultVerificationTest, NodesInsideArraysAndObjectsAreAllChecked) {
  const std::string record = Record();
  const std::string sealed = Returned(record, HmacSha256Hex(kKey, record));
  const std::string inner = sealed.substr(7, sealed.size() - 8);  // the "out" node
  const std::string forged =
      R"({"type":"object","value":{"integrity":{"type":"object","value":{}}}})";
  JsonValue results = Verify(R"({"out":{"type":"array","value":[)" + inner + "," +
                             R"({"type":"object","value":{"nested":)" + forged + "}}]}}");
  const auto& items = results.Find("out")->Find("value")->array();
  auto verified = [](const JsonValue& node) {
    return node.Find("value")->Find("integrity")->Find("value")->Find("verified")->Find("value");
  };
  EXPECT_TRUE(verified(items[0])->boolean());
  EXPECT_FALSE(verified(*items[1].Find("value")->Find("nested"))->boolean());
}

TEST_F(ResultVerificationTest, EscapedKeyIsFoundAndChecked) {
  const std::string outcome =
      R"({"out":{"type":"object","value":{"\u0069ntegrity":{"type":"object","value":{}}}}})";
  ASSERT_EQ(outcome.find("integrity"), std::string::npos);
  EXPECT_TRUE(MayHoldIntegrity(outcome));
  JsonValue results = Verify(outcome);
  EXPECT_FALSE(Field(results, "verified").boolean());
}

TEST(MayHoldIntegrity, PlainResultsSkipTheWalk) {
  EXPECT_FALSE(MayHoldIntegrity(R"({"results":{"out":{"type":"integer","value":1}}})"));
  EXPECT_TRUE(MayHoldIntegrity(R"({"integrity":1})"));
}

}  // namespace
}  // namespace kc::server
