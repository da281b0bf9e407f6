// The wire value encoding of a sealed record (worker/wire_value.h), pinned against what the
// worker's Python writes for the same values (python/kcoral/_worker/values.py, json.dumps with
// ensure_ascii=False and compact separators).
#include "worker/wire_value.h"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace kc::worker {
namespace {

using Json = nlohmann::ordered_json;

std::string Wire(const Json& value) {
  std::string out;
  Status status = AppendWireValue(value, out);
  EXPECT_TRUE(status.ok()) << status.message();
  return out;
}

TEST(WireValue, Scalars) {
  EXPECT_EQ(Wire(nullptr), R"({"type":"null"})");
  EXPECT_EQ(Wire(true), R"({"type":"boolean","value":true})");
  EXPECT_EQ(Wire(false), R"({"type":"boolean","value":false})");
  EXPECT_EQ(Wire(3), R"({"type":"integer","value":3})");
  EXPECT_EQ(Wire(-7), R"({"type":"integer","value":-7})");
  EXPECT_EQ(Wire(std::numeric_limits<uint64_t>::max()),
            R"({"type":"integer","value":18446744073709551615})");
  EXPECT_EQ(Wire("s"), R"({"type":"string","value":"s"})");
}

TEST(WireValue, NumbersAreTheShortestTextThatStaysAFloat) {
  EXPECT_EQ(Wire(0.5), R"({"type":"number","value":0.5})");
  EXPECT_EQ(Wire(3.0), R"({"type":"number","value":3.0})");  // not 3: it must read back a float
  EXPECT_EQ(Wire(0.1), R"({"type":"number","value":0.1})");
  EXPECT_EQ(Wire(-2.5e-7), R"({"type":"number","value":-2.5e-07})");
  EXPECT_EQ(Wire(1e100), R"({"type":"number","value":1e+100})");
}

TEST(WireValue, StringsAreEscapedAsPythonWritesThem) {
  EXPECT_EQ(Wire("a\"b\\c"), R"({"type":"string","value":"a\"b\\c"})");
  EXPECT_EQ(Wire("\n\t\r\b\f"), R"({"type":"string","value":"\n\t\r\b\f"})");
  EXPECT_EQ(Wire(std::string("\x01\x1f", 2)), R"({"type":"string","value":"\u0001\u001f"})");
  EXPECT_EQ(Wire("µs → ok"), R"({"type":"string","value":"µs → ok"})");  // not \u-escaped
  EXPECT_EQ(Wire("/"), R"({"type":"string","value":"/"})");
}

TEST(WireValue, ContainersNestAndKeepTheirOrder) {
  const Json record = {{"zeta", 1}, {"alpha", Json::array({true, nullptr, "x"})}};
  EXPECT_EQ(Wire(record), R"({"type":"object","value":{"zeta":{"type":"integer","value":1},)"
                          R"("alpha":{"type":"array","value":[{"type":"boolean","value":true},)"
                          R"({"type":"null"},{"type":"string","value":"x"}]}}})");
  EXPECT_EQ(Wire(Json::array()), R"({"type":"array","value":[]})");
  EXPECT_EQ(Wire(Json::object()), R"({"type":"object","value":{}})");
  EXPECT_EQ(Wire(Json::object({{"k\"", 1}})),
            R"({"type":"object","value":{"k\"":{"type":"integer","value":1}}})");
}

TEST(WireValue, TheOutputIsJsonThatReadsBackToTheSameNodes) {
  const Json record = {{"median_ms", 0.0125}, {"samples", 40}, {"name", "tab\there"}};
  const Json parsed = Json::parse(Wire(record));
  EXPECT_EQ(parsed["type"], "object");
  EXPECT_EQ(parsed["value"]["median_ms"]["value"].get<double>(), 0.0125);
  EXPECT_EQ(parsed["value"]["name"]["value"], "tab\there");
}

TEST(WireValue, AppendsToWhatIsThere) {
  std::string out = "[";
  ASSERT_TRUE(AppendWireValue(Json(1), out).ok());
  EXPECT_EQ(out, R"([{"type":"integer","value":1})");
}

TEST(WireValue, NonFiniteNumbersAndBinaryAreRefused) {
  std::string out;
  Status nan = AppendWireValue(Json({{"x", std::nan("")}}), out);
  EXPECT_EQ(nan.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(nan.message(), "a sealed result cannot hold a non-finite number");
  EXPECT_EQ(AppendWireValue(Json(std::numeric_limits<double>::infinity()), out).code(),
            StatusCode::kInvalidArgument);
  Status binary = AppendWireValue(Json::binary({1, 2, 3}), out);
  EXPECT_EQ(binary.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(binary.message(), "a sealed result cannot hold binary data");
}

}  // namespace
}  // namespace kc::worker
