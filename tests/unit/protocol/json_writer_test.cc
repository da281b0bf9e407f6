#include "protocol/json_writer.h"

#include <string>

#include <gtest/gtest.h>

#include "protocol/json_reader.h"

namespace kc::protocol {
namespace {

std::string Str(std::string_view text) {
  std::string out;
  JsonWriter(out).String(text);
  return out;
}

TEST(JsonWriter, BuildsNestedDocumentsWithCommas) {
  std::string out;
  JsonWriter(out)
      .BeginObject()
      .Key("a")
      .Int(-3)
      .Key("b")
      .BeginArray()
      .Bool(true)
      .Null()
      .BeginObject()
      .EndObject()
      .BeginArray()
      .EndArray()
      .EndArray()
      .Key("c")
      .Double(0.5)
      .EndObject();
  EXPECT_EQ(out, R"({"a":-3,"b":[true,null,{},[]],"c":0.5})");
}

// Python's json.dumps(..., ensure_ascii=False) spelling, which the worker uses.
TEST(JsonWriter, EscapesLikePython) {
  EXPECT_EQ(Str("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Str("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  EXPECT_EQ(Str(std::string("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\x7f\"");
  EXPECT_EQ(Str("/ \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"/ \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
}

TEST(JsonWriter, Wtf8SurrogatesBecomeEscapes) {
  EXPECT_EQ(Str("\xED\xA0\x80"), R"("\ud800")");
  EXPECT_EQ(Str("x\xED\xBF\xBFy"), R"("x\udfffy")");
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(Str("ok\xFF\xFE!"), "\"ok\xEF\xBF\xBD\xEF\xBF\xBD!\"");
  EXPECT_EQ(Str("\xE2\x82"), "\"\xEF\xBF\xBD\"");
}

TEST(JsonWriter, DoublesStayFloatsAndNonFiniteIsNull) {
  std::string out;
  JsonWriter(out).BeginArray().Double(3.0).Double(1e300).Double(-0.25).Double(1.0 / 0.0).EndArray();
  EXPECT_EQ(out, "[3.0,1e+300,-0.25,null]");
}

TEST(JsonWriter, ReadThenWriteIsIdentityForCompactText) {
  for (const char* text :
       {R"({"a":[1,-2.5,1e-07,true,false,null],"b":{"c":"\ud800\u0001"}})",
        R"([123456789012345678901234567890,-98765432109876543210])", R"("")", "[]", "{}"}) {
    StatusOr<JsonValue> value = ReadJson(text);
    ASSERT_TRUE(value.ok()) << text;
    EXPECT_EQ(WriteJson(*value), text);
  }
}

}  // namespace
}  // namespace kc::protocol
