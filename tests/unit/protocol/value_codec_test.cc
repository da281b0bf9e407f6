#include "protocol/value_codec.h"

#include <string>

#include <gtest/gtest.h>

#include "base/sha256.h"
#include "protocol/json_reader.h"
#include "protocol/json_writer.h"

namespace kc::protocol {
namespace {

JsonValue Parse(std::string_view text) {
  StatusOr<JsonValue> parsed = ReadJson(text, {.max_depth = kMaxOutcomeDepth});
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? *std::move(parsed) : JsonValue();
}

// The member at a path of object keys and array indices (as strings of digits).
const JsonValue& At(const JsonValue& root, std::initializer_list<std::string_view> path) {
  const JsonValue* node = &root;
  for (std::string_view step : path) {
    if (node->is_array()) {
      node = &node->array().at(std::stoul(std::string(step)));
    } else {
      node = node->Find(step);
      if (node == nullptr) {
        ADD_FAILURE() << "no member " << step;
        static const JsonValue kNull;
        return kNull;
      }
    }
  }
  return *node;
}

std::string Dump(const JsonValue& value) {
  return WriteJson(value);
}

void ExpectInternalJson(JsonValue results, const std::vector<std::string_view>& segments,
                        std::string_view fragment = "") {
  Status status = FinalizeResults(results, segments);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

void ExpectInternal(std::string_view results, const std::vector<std::string_view>& segments = {},
                    std::string_view fragment = "") {
  ExpectInternalJson(Parse(results), segments, fragment);
}

// --- Accepted results ---------------------------------------------------------

TEST(ValueCodec, ScalarNodesPassThroughUnchanged) {
  const char* text =
      R"({"n":{"type":"null"},"b":{"type":"boolean","value":true},)"
      R"("i":{"type":"integer","value":-12},"u":{"type":"integer","value":18446744073709551615},)"
      R"("x":{"type":"number","value":0.5},"xi":{"type":"number","value":3},)"
      R"("s":{"type":"string","value":"hi"}})";
  JsonValue results = Parse(text);
  ASSERT_TRUE(FinalizeResults(results, {}).ok());
  EXPECT_EQ(results, Parse(text));
}

TEST(ValueCodec, EmptyResultsAreAccepted) {
  JsonValue results = JsonValue::Object();
  EXPECT_TRUE(FinalizeResults(results, {}).ok());
  EXPECT_EQ(Dump(results), "{}");
}

TEST(ValueCodec, BytesNodeGetsPartNameAndDigest) {
  JsonValue results = Parse(R"({"k":{"type":"bytes","part":0}})");
  ASSERT_TRUE(FinalizeResults(results, {"abc"}).ok());
  EXPECT_EQ(Dump(results),
            R"({"k":{"type":"bytes","part":"return:0","sha256":")" + Sha256Hex("abc") + "\"}}");
}

TEST(ValueCodec, TensorNodeGetsWireForm) {
  JsonValue results = Parse(R"({"t":{"type":"tensor","dtype":"float32","shape":[2,2],"part":0}})");
  std::string bytes(16, '\x01');
  ASSERT_TRUE(FinalizeResults(results, {bytes}).ok());
  EXPECT_EQ(
      Dump(results),
      R"({"t":{"type":"tensor","dtype":"float32","shape":[2,2],"part":"return:0","sha256":")" +
          Sha256Hex(bytes) + "\"}}");
}

TEST(ValueCodec, KeyOrderOfRawTensorDoesNotMatter) {
  JsonValue results = Parse(R"({"t":{"part":0,"shape":[],"dtype":"int64","type":"tensor"}})");
  ASSERT_TRUE(FinalizeResults(results, {std::string(8, '\0')}).ok());
  EXPECT_EQ(At(results, {"t"}).object().front().key, "type");
}

TEST(ValueCodec, EmptyTensorHasEmptyPart) {
  JsonValue results = Parse(R"({"t":{"type":"tensor","dtype":"bfloat16","shape":[3,0],"part":0}})");
  EXPECT_TRUE(FinalizeResults(results, {""}).ok());
}

TEST(ValueCodec, FileNodeGetsSize) {
  JsonValue results = Parse(R"({"f":{"type":"file","part":0}})");
  ASSERT_TRUE(FinalizeResults(results, {"hello"}).ok());
  EXPECT_EQ(Dump(results), R"({"f":{"type":"file","size":5,"part":"return:0","sha256":")" +
                               Sha256Hex("hello") + "\"}}");
}

TEST(ValueCodec, FolderFilesGetWireFormInOrder) {
  JsonValue results = Parse(R"({"d":{"type":"folder","files":{"a/x":{"type":"file","part":0},)"
                            R"("b":{"type":"file","part":1}},)"
                            R"("directories":["a","a/empty"]}})");
  ASSERT_TRUE(FinalizeResults(results, {"x", "yy"}).ok());
  EXPECT_TRUE(At(results, {"d", "files", "a/x", "part"}).IsString("return:0"));
  EXPECT_TRUE(At(results, {"d", "files", "b", "part"}).IsString("return:1"));
  EXPECT_EQ(At(results, {"d", "files", "b", "size"}).AsInt64(), 2);
  EXPECT_EQ(At(results, {"d", "directories"}), Parse(R"(["a","a/empty"])"));
}

TEST(ValueCodec, EmptyFolderHasNoBinaryParts) {
  JsonValue results = Parse(R"({"d":{"type":"folder","files":{},"directories":[]}})");
  ASSERT_TRUE(FinalizeResults(results, {}).ok());
}

TEST(ValueCodec, PartsNumberDepthFirstAcrossResults) {
  JsonValue results = Parse(R"({"first":{"type":"array","value":[{"type":"bytes","part":0},)"
                            R"({"type":"object","value":{"z":{"type":"bytes","part":1},)"
                            R"("a":{"type":"bytes","part":2}}}]},)"
                            R"("second":{"type":"bytes","part":3}})");
  ASSERT_TRUE(FinalizeResults(results, {"0", "1", "2", "3"}).ok());
  EXPECT_TRUE(At(results, {"first", "value", "1", "value", "z", "part"}).IsString("return:1"));
  EXPECT_TRUE(At(results, {"first", "value", "1", "value", "a", "part"}).IsString("return:2"));
  EXPECT_TRUE(At(results, {"second", "part"}).IsString("return:3"));
  EXPECT_EQ(results.object().front().key, "first");
}

TEST(ValueCodec, NestedBinaryIsFoundByHasBinaryParts) {
  JsonValue results = Parse(R"({"a":{"type":"object","value":{"x":{"type":"array",)"
                            R"("value":[{"type":"bytes","part":0}]}}}})");
  ASSERT_TRUE(FinalizeResults(results, {"q"}).ok());
}

TEST(ValueCodec, LiteralLookalikeIsNotBinary) {
  JsonValue results =
      Parse(R"({"a":{"type":"object","value":{"type":{"type":"string","value":"bytes"}}}})");
  ASSERT_TRUE(FinalizeResults(results, {}).ok());
}

// --- Refused results ------------------------------------------------------------

TEST(ValueCodec, ResultsNotAnObjectIsInternal) {
  ExpectInternal("[]");
}

TEST(ValueCodec, NodeNotAnObjectIsInternal) {
  ExpectInternal(R"({"k":1})", {}, "results[\"k\"]");
}

TEST(ValueCodec, MissingTypeIsInternal) {
  ExpectInternal(R"({"k":{"value":1}})");
}

TEST(ValueCodec, NonStringTypeIsInternal) {
  ExpectInternal(R"({"k":{"type":1}})");
}

TEST(ValueCodec, UnknownTypeIsInternal) {
  ExpectInternal(R"({"k":{"type":"set","value":[]}})", {}, "unknown node type");
}

TEST(ValueCodec, NullWithValueIsInternal) {
  ExpectInternal(R"({"k":{"type":"null","value":null}})");
}

TEST(ValueCodec, ExtraKeyIsInternal) {
  ExpectInternal(R"({"k":{"type":"integer","value":1,"extra":0}})", {}, "extra");
}

TEST(ValueCodec, MissingValueIsInternal) {
  ExpectInternal(R"({"k":{"type":"string"}})");
}

TEST(ValueCodec, BoolAsIntegerIsInternal) {
  ExpectInternal(R"({"k":{"type":"integer","value":true}})");
}

TEST(ValueCodec, FloatAsIntegerIsInternal) {
  ExpectInternal(R"({"k":{"type":"integer","value":1.5}})");
}

TEST(ValueCodec, IntegerAsBooleanIsInternal) {
  ExpectInternal(R"({"k":{"type":"boolean","value":1}})");
}

TEST(ValueCodec, StringAsNumberIsInternal) {
  ExpectInternal(R"({"k":{"type":"number","value":"1"}})");
}

TEST(ValueCodec, BoolAsNumberIsInternal) {
  ExpectInternal(R"({"k":{"type":"number","value":false}})");
}

TEST(ValueCodec, NonNumberTextAsNumberIsInternal) {
  ExpectInternal(R"({"k":{"type":"number","value":null}})");
}

TEST(ValueCodec, NumberAsStringIsInternal) {
  ExpectInternal(R"({"k":{"type":"string","value":1}})");
}

TEST(ValueCodec, ArrayWithObjectValueIsInternal) {
  ExpectInternal(R"({"k":{"type":"array","value":{}}})");
}

TEST(ValueCodec, ObjectWithArrayValueIsInternal) {
  ExpectInternal(R"({"k":{"type":"object","value":[]}})");
}

TEST(ValueCodec, BadNestedNodeNamesItsPath) {
  ExpectInternal(R"({"k":{"type":"array","value":[{"type":"null"},)"
                 R"({"type":"object","value":{"x":{"type":"null","v":1}}}]}})",
                 {}, "results[\"k\"].value[1].value[\"x\"]");
}

TEST(ValueCodec, ExcessiveNestingIsInternal) {
  JsonValue node = Parse(R"({"type":"null"})");
  for (int i = 0; i < 2000; ++i) {
    JsonValue array = JsonValue::Object();
    array.Add("type", JsonValue::String("array"));
    JsonArray items;
    items.push_back(std::move(node));
    array.Add("value", JsonValue::Array(std::move(items)));
    node = std::move(array);
  }
  JsonValue results = JsonValue::Object();
  results.Add("k", std::move(node));
  ExpectInternalJson(std::move(results), {}, "nested too deeply");
}

TEST(ValueCodec, BytesWithInlineValueIsInternal) {
  ExpectInternal(R"({"k":{"type":"bytes","part":0,"value":"x"}})", {"x"});
}

TEST(ValueCodec, BytesWithSha256FromWorkerIsInternal) {
  ExpectInternal(R"({"k":{"type":"bytes","part":0,"sha256":"00"}})", {"x"});
}

TEST(ValueCodec, StringPartIsInternal) {
  ExpectInternal(R"({"k":{"type":"bytes","part":"return:0"}})", {"x"}, "part");
}

TEST(ValueCodec, NegativePartIsInternal) {
  ExpectInternal(R"({"k":{"type":"bytes","part":-1}})", {"x"}, "part");
}

TEST(ValueCodec, BoolPartIsInternal) {
  ExpectInternal(R"({"k":{"type":"bytes","part":false}})", {"x"}, "part");
}

TEST(ValueCodec, PartsOutOfOrderAreInternal) {
  ExpectInternal(R"({"a":{"type":"bytes","part":1},"b":{"type":"bytes","part":0}})", {"x", "y"},
                 "out of order");
}

TEST(ValueCodec, PartsNotStartingAtZeroAreInternal) {
  ExpectInternal(R"({"a":{"type":"bytes","part":1}})", {"x", "y"}, "out of order");
}

TEST(ValueCodec, PartUsedTwiceIsInternal) {
  ExpectInternal(R"({"a":{"type":"bytes","part":0},"b":{"type":"bytes","part":0}})", {"x", "y"},
                 "out of order");
}

TEST(ValueCodec, PartWithoutSegmentIsInternal) {
  ExpectInternal(R"({"a":{"type":"bytes","part":0}})", {}, "no binary segment");
}

TEST(ValueCodec, UnusedSegmentIsInternal) {
  ExpectInternal(R"({"a":{"type":"bytes","part":0}})", {"x", "y"}, "2 binary segments");
}

TEST(ValueCodec, SegmentsWithoutBinaryNodesAreInternal) {
  ExpectInternal(R"({"a":{"type":"null"}})", {"x"}, "binary segments");
}

TEST(ValueCodec, TensorLengthMismatchIsInternal) {
  ExpectInternal(R"({"t":{"type":"tensor","dtype":"float16","shape":[3],"part":0}})",
                 {std::string_view("12345")}, "does not match");
}

TEST(ValueCodec, TensorUnknownDtypeIsInternal) {
  ExpectInternal(R"({"t":{"type":"tensor","dtype":"complex64","shape":[1],"part":0}})",
                 {std::string_view("12345678")}, "dtype");
}

TEST(ValueCodec, TensorNegativeDimIsInternal) {
  ExpectInternal(R"({"t":{"type":"tensor","dtype":"uint8","shape":[-1],"part":0}})", {""}, "shape");
}

TEST(ValueCodec, TensorBoolDimIsInternal) {
  ExpectInternal(R"({"t":{"type":"tensor","dtype":"uint8","shape":[true],"part":0}})", {"x"},
                 "shape");
}

TEST(ValueCodec, TensorShapeNotArrayIsInternal) {
  ExpectInternal(R"({"t":{"type":"tensor","dtype":"uint8","shape":1,"part":0}})", {"x"}, "shape");
}

TEST(ValueCodec, TensorOverflowingShapeIsInternal) {
  ExpectInternal(
      R"({"t":{"type":"tensor","dtype":"int64","shape":[9223372036854775807,4],"part":0}})", {""},
      "does not match");
}

TEST(ValueCodec, TensorMissingShapeIsInternal) {
  ExpectInternal(R"({"t":{"type":"tensor","dtype":"uint8","part":0}})", {"x"}, "shape");
}

TEST(ValueCodec, FileWithSizeFromWorkerIsInternal) {
  ExpectInternal(R"({"f":{"type":"file","size":1,"part":0}})", {"x"});
}

TEST(ValueCodec, FolderWithExtraKeyIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{},"directories":[],"root":"x"}})");
}

TEST(ValueCodec, FolderFilesNotObjectIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":[],"directories":[]}})");
}

TEST(ValueCodec, FolderUnsortedFilesAreInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{"b":{"type":"file","part":0},)"
                 R"("a":{"type":"file","part":1}},"directories":[]}})",
                 {"x", "y"}, "sorted");
}

TEST(ValueCodec, FolderUnsortedDirectoriesAreInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{},"directories":["b","a"]}})", {}, "sorted");
}

TEST(ValueCodec, FolderDuplicateDirectoriesAreInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{},"directories":["a","a"]}})", {}, "sorted");
}

TEST(ValueCodec, FolderNonCanonicalPathIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{"./a":{"type":"file","part":0}},)"
                 R"("directories":[]}})",
                 {"x"}, "canonical");
}

TEST(ValueCodec, FolderAbsoluteDirectoryIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{},"directories":["/a"]}})", {}, "canonical");
}

TEST(ValueCodec, FolderMissingParentDirectoryIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{"a/x":{"type":"file","part":0}},)"
                 R"("directories":[]}})",
                 {"x"}, "parent directory");
}

TEST(ValueCodec, FolderMissingAncestorOfDirectoryIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{},"directories":["a/b"]}})", {}, "ancestor");
}

TEST(ValueCodec, FolderPathBothFileAndDirectoryIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{"a":{"type":"file","part":0}},)"
                 R"("directories":["a"]}})",
                 {"x"}, "file and directory");
}

TEST(ValueCodec, FolderEntryThatIsBytesIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{"a":{"type":"bytes","part":0}},)"
                 R"("directories":[]}})",
                 {"x"}, "file node");
}

TEST(ValueCodec, FolderFileWithExtraKeyIsInternal) {
  ExpectInternal(R"({"d":{"type":"folder","files":{"a":{"type":"file","part":0,"mode":1}},)"
                 R"("directories":[]}})",
                 {"x"}, "extra");
}

// --- Values the reference carries that nlohmann cannot (§4.2) -------------------

TEST(ValueCodec, IntegersBeyond64BitsKeepTheirDigits) {
  const char* text = R"({"big":{"type":"integer","value":1180591620717411303424},)"
                     R"("neg":{"type":"integer","value":-36893488147419103232},)"
                     R"("huge":{"type":"integer","value":)"
                     R"(1606938044258990275541962092341162602522202993782792835301376}})";
  JsonValue results = Parse(text);
  ASSERT_TRUE(FinalizeResults(results, {}).ok());
  EXPECT_EQ(Dump(results), text);
}

TEST(ValueCodec, BigIntegerAsNumberIsAccepted) {
  JsonValue results = Parse(R"({"x":{"type":"number","value":100000000000000000000000}})");
  EXPECT_TRUE(FinalizeResults(results, {}).ok());
}

TEST(ValueCodec, LoneSurrogatesInStringsAndKeysSurvive) {
  const char* text =
      R"({"\udc00":{"type":"object","value":{"\ud800":{"type":"string","value":"a\udfffb"}}}})";
  JsonValue results = Parse(text);
  ASSERT_TRUE(FinalizeResults(results, {}).ok());
  EXPECT_EQ(Dump(results), text);
}

TEST(ValueCodec, BigIntegerPartIsInternal) {
  ExpectInternal(R"({"k":{"type":"bytes","part":18446744073709551616}})", {"x"}, "part");
}

TEST(ValueCodec, BigIntegerTensorDimIsInternal) {
  ExpectInternal(
      R"({"t":{"type":"tensor","dtype":"uint8","shape":[18446744073709551616],"part":0}})", {"x"},
      "shape");
}

}  // namespace
}  // namespace kc::protocol
