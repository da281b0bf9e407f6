#include <string>

#include <gtest/gtest.h>

#include "protocol/program.h"

namespace kc::protocol {
namespace {

using nlohmann::json;

const std::string kHashA(64, 'a');
const std::string kHashB(64, 'b');

json Module(std::string id = "m") {
  return {{"op", "upload"}, {"id", id}, {"kind", "module"}, {"source", "def f(x): return x"}};
}
json GetFunction(std::string id = "f", std::string module = "m") {
  return {{"op", "get_function"}, {"id", id}, {"module", {{"$ref", module}}}, {"name", "f"}};
}
json RunOp(std::string id = "y", std::string fn = "f") {
  return {{"op", "run"}, {"id", id}, {"fn", {{"$ref", fn}}}};
}
json ValueReturn(std::string key = "out", std::string ref = "y") {
  return {{"op", "return"}, {"key", key}, {"value", {{"$ref", ref}}}};
}
json Tensor(std::string id = "t", std::string blob = kHashA, json shape = {2, 3},
            std::string dtype = "float32") {
  return {{"op", "upload"}, {"id", id},       {"kind", "tensor"},
          {"blob", blob},   {"dtype", dtype}, {"shape", shape}};
}
json FileUpload(std::string id, std::string path, std::string blob = kHashA) {
  return {{"op", "upload"}, {"id", id}, {"kind", "file"}, {"blob", blob}, {"path", path}};
}
json BlobUpload(std::string kind, std::string id, std::string blob = kHashA) {
  return {{"op", "upload"}, {"id", id}, {"kind", kind}, {"blob", blob}};
}
json Prog(json instructions) {
  return {{"instructions", instructions}};
}
json Basic() {
  return Prog({Module(), GetFunction(), RunOp(), ValueReturn()});
}

StatusOr<protocol::Program> Parse(const json& program) {
  return ParseProgram(program.dump());
}

// Expects a 400 whose message contains `fragment`.
void ExpectInvalid(const json& program, std::string_view fragment) {
  StatusOr<protocol::Program> parsed = Parse(program);
  ASSERT_FALSE(parsed.ok()) << program.dump();
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find(fragment), std::string::npos)
      << "message: " << parsed.status().message();
}

json With(json instruction, const std::string& key, json value) {
  instruction[key] = std::move(value);
  return instruction;
}
json Without(json instruction, const std::string& key) {
  instruction.erase(key);
  return instruction;
}

// --- Accepted programs ------------------------------------------------------

TEST(ProgramParser, ParsesBasicProgram) {
  StatusOr<protocol::Program> parsed = Parse(Basic());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->instructions.size(), 4u);
  const auto& ins = parsed->instructions;
  EXPECT_EQ(ins[0].op, Op::kUpload);
  EXPECT_EQ(ins[0].upload_kind, UploadKind::kModule);
  EXPECT_EQ(ins[0].source, "def f(x): return x");
  EXPECT_FALSE(ins[0].language.has_value());
  EXPECT_EQ(ins[1].op, Op::kGetFunction);
  EXPECT_EQ(ins[1].module_ref, "m");
  EXPECT_EQ(ins[1].name, "f");
  EXPECT_FALSE(ins[1].cpu_only);
  EXPECT_EQ(ins[2].op, Op::kRun);
  EXPECT_EQ(ins[2].fn_ref, "f");
  EXPECT_EQ(ins[2].args, json::array());
  EXPECT_EQ(ins[3].op, Op::kReturn);
  EXPECT_EQ(ins[3].return_kind, ReturnKind::kValue);
  EXPECT_EQ(ins[3].key, "out");
  EXPECT_EQ(ins[3].value_ref, "y");
  EXPECT_TRUE(parsed->blobs.empty());
  EXPECT_FALSE(parsed->options.timeout_seconds.has_value());
}

TEST(ProgramParser, ParsesOptions) {
  json program = Basic();
  program["options"] = {{"timeout_seconds", 1.5}, {"output_limit_bytes", 0}, {"gpu_count", 8}};
  StatusOr<protocol::Program> parsed = Parse(program);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->options.timeout_seconds, 1.5);
  EXPECT_EQ(parsed->options.output_limit_bytes, 0);
  EXPECT_EQ(parsed->options.gpu_count, 8);
}

TEST(ProgramParser, IntegerTimeoutIsAccepted) {
  json program = Basic();
  program["options"] = {{"timeout_seconds", 30}};
  StatusOr<protocol::Program> parsed = Parse(program);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->options.timeout_seconds, 30.0);
}

TEST(ProgramParser, EmptyOptionsAreAccepted) {
  json program = Basic();
  program["options"] = json::object();
  EXPECT_TRUE(Parse(program).ok());
}

TEST(ProgramParser, HugeOutputLimitIsClampedNotRejected) {
  StatusOr<protocol::Program> parsed =
      ParseProgram(R"({"instructions":[{"op":"upload","id":"m","kind":"module","source":""}],)"
                   R"("options":{"output_limit_bytes":18446744073709551615}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->options.output_limit_bytes, INT64_MAX);
}

TEST(ProgramParser, ModuleLanguageCudaIsAccepted) {
  StatusOr<protocol::Program> parsed = Parse(Prog({With(Module(), "language", "cuda")}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->instructions[0].language, "cuda");
}

TEST(ProgramParser, ModuleLanguagePythonIsAccepted) {
  StatusOr<protocol::Program> parsed = Parse(Prog({With(Module(), "language", "python")}));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->instructions[0].language, "python");
}

TEST(ProgramParser, EmptyModuleSourceIsAccepted) {
  EXPECT_TRUE(Parse(Prog({With(Module(), "source", "")})).ok());
}

TEST(ProgramParser, CpuOnlyTrueIsRecorded) {
  StatusOr<protocol::Program> parsed =
      Parse(Prog({Module(), With(GetFunction(), "cpu_only", true)}));
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->instructions[1].cpu_only);
}

TEST(ProgramParser, RunArgsKeepNestedReferencesAsLiterals) {
  json args = json::array({{{"$ref", "m"}},
                           2,
                           {{"nested", {{"$ref", "undefined"}}}},
                           json::array({{{"$ref", "later"}}})});
  StatusOr<protocol::Program> parsed =
      Parse(Prog({Module(), GetFunction(), With(RunOp(), "args", args)}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->instructions[2].args, args);
}

TEST(ProgramParser, RefWithEmptyNameInArgsIsLiteral) {
  json args = json::array({{{"$ref", ""}}});
  EXPECT_TRUE(Parse(Prog({Module(), GetFunction(), With(RunOp(), "args", args)})).ok());
}

TEST(ProgramParser, RefWithExtraKeyInArgsIsLiteral) {
  json args = json::array({{{"$ref", "nope"}, {"y", 1}}});
  EXPECT_TRUE(Parse(Prog({Module(), GetFunction(), With(RunOp(), "args", args)})).ok());
}

TEST(ProgramParser, RefWithNonStringNameInArgsIsLiteral) {
  json args = json::array({{{"$ref", 5}}});
  EXPECT_TRUE(Parse(Prog({Module(), GetFunction(), With(RunOp(), "args", args)})).ok());
}

TEST(ProgramParser, RunMayCallTheResultOfAnotherRun) {
  EXPECT_TRUE(Parse(Prog({Module(), GetFunction(), RunOp("g"), RunOp("h", "g")})).ok());
}

TEST(ProgramParser, ReturnKeysAndIdsAreSeparateNamespaces) {
  EXPECT_TRUE(Parse(Prog({Module(), GetFunction(), RunOp(), ValueReturn("y", "y")})).ok());
}

TEST(ProgramParser, ValueReturnMayReferToAnUpload) {
  EXPECT_TRUE(Parse(Prog({Module(), ValueReturn("out", "m")})).ok());
}

TEST(ProgramParser, TensorUploadIsParsed) {
  StatusOr<protocol::Program> parsed = Parse(Prog({Tensor()}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const Instruction& t = parsed->instructions[0];
  EXPECT_EQ(t.upload_kind, UploadKind::kTensor);
  EXPECT_EQ(t.blob, kHashA);
  EXPECT_EQ(t.dtype, "float32");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(parsed->blobs.size(), 1u);
  EXPECT_EQ(parsed->blobs[0].tensor_bytes, 24u);
  EXPECT_EQ(parsed->blobs[0].tensor_upload_id, "t");
  EXPECT_TRUE(parsed->blobs[0].used_by_memory);
  EXPECT_FALSE(parsed->blobs[0].used_by_file);
}

TEST(ProgramParser, ScalarTensorHasOneElement) {
  StatusOr<protocol::Program> parsed = Parse(Prog({Tensor("t", kHashA, json::array(), "int64")}));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->blobs[0].tensor_bytes, 8u);
}

TEST(ProgramParser, ZeroDimensionTensorHasNoBytes) {
  StatusOr<protocol::Program> parsed = Parse(Prog({Tensor("t", kHashA, {0, 5}, "float16")}));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->blobs[0].tensor_bytes, 0u);
}

TEST(ProgramParser, ZeroDimensionBesideHugeDimensionsHasNoBytes) {
  json shape = {INT64_MAX, INT64_MAX, 0};
  StatusOr<protocol::Program> parsed = Parse(Prog({Tensor("t", kHashA, shape)}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->blobs[0].tensor_bytes, 0u);
}

TEST(ProgramParser, EveryDtypeHasItsItemSize) {
  const std::pair<const char*, int> kExpected[] = {
      {"bool", 1},    {"uint8", 1},    {"int8", 1},          {"int16", 2},
      {"int32", 4},   {"int64", 8},    {"float16", 2},       {"float32", 4},
      {"float64", 8}, {"bfloat16", 2}, {"float8_e4m3fn", 1}, {"float8_e5m2", 1}};
  for (const auto& [name, size] : kExpected) {
    EXPECT_EQ(DtypeItemSize(name), size) << name;
    StatusOr<protocol::Program> parsed = Parse(Prog({Tensor("t", kHashA, {3}, name)}));
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(parsed->blobs[0].tensor_bytes, 3u * size) << name;
  }
}

TEST(ProgramParser, UnknownDtypeHasItemSizeZero) {
  EXPECT_EQ(DtypeItemSize("float128"), 0);
  EXPECT_EQ(DtypeItemSize("torch.float32"), 0);
  EXPECT_EQ(DtypeItemSize(""), 0);
}

TEST(ProgramParser, BlobsFollowFirstAppearanceOrderAndUsage) {
  json program = Prog({BlobUpload("bytes", "b1", kHashB), FileUpload("f1", "x.bin", kHashA),
                       BlobUpload("library", "l1", kHashA), Tensor("t1", kHashB, {4}, "uint8"),
                       BlobUpload("bytes", "b2", kHashB)});
  StatusOr<protocol::Program> parsed = Parse(program);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->blobs.size(), 2u);
  EXPECT_EQ(parsed->blobs[0].sha256, kHashB);
  EXPECT_TRUE(parsed->blobs[0].used_by_memory);
  EXPECT_FALSE(parsed->blobs[0].used_by_file);
  EXPECT_EQ(parsed->blobs[0].tensor_bytes, 4u);
  EXPECT_EQ(parsed->blobs[1].sha256, kHashA);
  EXPECT_TRUE(parsed->blobs[1].used_by_file);
  EXPECT_TRUE(parsed->blobs[1].used_by_memory);
  EXPECT_FALSE(parsed->blobs[1].tensor_bytes.has_value());
}

TEST(ProgramParser, TwoTensorsWithSameBlobAndLengthAreAccepted) {
  EXPECT_TRUE(
      Parse(Prog({Tensor("t1", kHashA, {2, 2}, "float32"), Tensor("t2", kHashA, {16}, "uint8")}))
          .ok());
}

TEST(ProgramParser, FileUploadPathIsNormalized) {
  StatusOr<protocol::Program> parsed = Parse(Prog({FileUpload("f", "./data//x.bin")}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->instructions[0].path, "data/x.bin");
  EXPECT_EQ(parsed->instructions[0].upload_kind, UploadKind::kFile);
  EXPECT_TRUE(parsed->blobs[0].used_by_file);
}

TEST(ProgramParser, SiblingFilePathsAreAccepted) {
  EXPECT_TRUE(
      Parse(Prog({FileUpload("a", "d/x"), FileUpload("b", "d/y"), FileUpload("c", "dx")})).ok());
}

TEST(ProgramParser, FileReturnWithLiteralPathIsNormalized) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "file"}, {"path", "out/./r.txt"}};
  StatusOr<protocol::Program> parsed = Parse(Prog({ret}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->instructions[0].return_kind, ReturnKind::kFile);
  EXPECT_EQ(parsed->instructions[0].path, "out/r.txt");
  EXPECT_FALSE(parsed->instructions[0].path_ref.has_value());
}

TEST(ProgramParser, FolderReturnWithReferencePathIsParsed) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "folder"}, {"path", {{"$ref", "f"}}}};
  StatusOr<protocol::Program> parsed = Parse(Prog({FileUpload("f", "a/b"), ret}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->instructions[1].return_kind, ReturnKind::kFolder);
  EXPECT_EQ(parsed->instructions[1].path_ref, "f");
}

// --- Envelope ---------------------------------------------------------------

TEST(ProgramParser, InvalidJsonIsInvalidArgument) {
  StatusOr<protocol::Program> parsed = ParseProgram("{\"instructions\": [");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
}

TEST(ProgramParser, DuplicateKeyInProgramIsInvalidArgument) {
  StatusOr<protocol::Program> parsed = ParseProgram(
      R"({"instructions":[{"op":"upload","id":"m","kind":"module","source":"","source":""}]})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("duplicate key"), std::string::npos);
}

TEST(ProgramParser, NonFiniteArgIsInvalidArgument) {
  StatusOr<protocol::Program> parsed =
      ParseProgram(R"({"instructions":[{"op":"upload","id":"m","kind":"module","source":""},)"
                   R"({"op":"get_function","id":"f","module":{"$ref":"m"},"name":"f"},)"
                   R"({"op":"run","id":"y","fn":{"$ref":"f"},"args":[1e999]}]})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
}

TEST(ProgramParser, ProgramNotAnObjectIsInvalidArgument) {
  ExpectInvalid(json::array({1}), "program: expected a JSON object");
}

TEST(ProgramParser, UnknownEnvelopeKeyIsInvalidArgument) {
  json program = Basic();
  program["extra"] = 1;
  ExpectInvalid(program, "program: unknown key 'extra'");
}

TEST(ProgramParser, MissingInstructionsIsInvalidArgument) {
  ExpectInvalid(json{{"options", json::object()}}, "instructions");
}

TEST(ProgramParser, EmptyInstructionsIsInvalidArgument) {
  ExpectInvalid(Prog(json::array()), "instructions: expected a non-empty array");
}

TEST(ProgramParser, InstructionsNotAnArrayIsInvalidArgument) {
  ExpectInvalid(json{{"instructions", {{"op", "run"}}}}, "instructions: expected");
}

TEST(ProgramParser, InstructionNotAnObjectIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), "upload"}), "instructions[1]: expected an object");
}

// --- Options ----------------------------------------------------------------

json WithOptions(json options) {
  json program = Basic();
  program["options"] = std::move(options);
  return program;
}

TEST(ProgramParser, OptionsNotAnObjectIsInvalidArgument) {
  ExpectInvalid(WithOptions(json::array()), "options: expected an object");
}

TEST(ProgramParser, NullOptionsIsInvalidArgument) {
  ExpectInvalid(WithOptions(nullptr), "options: expected an object");
}

TEST(ProgramParser, UnknownOptionIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"priority", 1}}), "options: unknown key 'priority'");
}

TEST(ProgramParser, BoolTimeoutIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"timeout_seconds", true}}), "options.timeout_seconds:");
}

TEST(ProgramParser, StringTimeoutIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"timeout_seconds", "30"}}), "options.timeout_seconds:");
}

TEST(ProgramParser, ZeroTimeoutIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"timeout_seconds", 0}}), "options.timeout_seconds:");
}

TEST(ProgramParser, NegativeTimeoutIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"timeout_seconds", -1.5}}), "options.timeout_seconds:");
}

TEST(ProgramParser, NullTimeoutIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"timeout_seconds", nullptr}}), "options.timeout_seconds:");
}

TEST(ProgramParser, BoolOutputLimitIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"output_limit_bytes", false}}), "options.output_limit_bytes:");
}

TEST(ProgramParser, FloatOutputLimitIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"output_limit_bytes", 10.0}}), "options.output_limit_bytes:");
}

TEST(ProgramParser, NegativeOutputLimitIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"output_limit_bytes", -1}}), "options.output_limit_bytes:");
}

TEST(ProgramParser, BoolGpuCountIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"gpu_count", true}}), "options.gpu_count:");
}

TEST(ProgramParser, ZeroGpuCountIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"gpu_count", 0}}), "options.gpu_count:");
}

TEST(ProgramParser, NineGpusIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"gpu_count", 9}}), "options.gpu_count:");
}

TEST(ProgramParser, FloatGpuCountIsInvalidArgument) {
  ExpectInvalid(WithOptions({{"gpu_count", 2.0}}), "options.gpu_count:");
}

TEST(ProgramParser, GpuArchIsAnArchitectureName) {
  json program = Basic();
  program["options"] = {{"gpu_arch", "sm_90a"}};
  StatusOr<protocol::Program> parsed = Parse(program);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->options.gpu_arch, "sm_90a");
  for (json bad : {json("hopper"), json("sm_9"), json(90), json(true), json("gpu/sm_90a")}) {
    ExpectInvalid(WithOptions({{"gpu_arch", bad}}), "options.gpu_arch:");
  }
}

// --- Ops and field sets -----------------------------------------------------

TEST(ProgramParser, MissingOpIsInvalidArgument) {
  ExpectInvalid(Prog({Without(Module(), "op")}), "instructions[0].op: missing");
}

TEST(ProgramParser, NonStringOpIsInvalidArgument) {
  ExpectInvalid(Prog({With(Module(), "op", 1)}), "instructions[0].op: expected a string");
}

TEST(ProgramParser, UnknownOpIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(RunOp(), "op", "call")}),
                "instructions[1].op: unknown op 'call'");
}

TEST(ProgramParser, UnknownUploadKindIsInvalidArgument) {
  ExpectInvalid(Prog({With(Module(), "kind", "folder")}),
                "instructions[0].kind: unknown upload kind 'folder'");
}

TEST(ProgramParser, MissingUploadKindIsInvalidArgument) {
  ExpectInvalid(Prog({Without(Module(), "kind")}), "instructions[0].kind: missing");
}

TEST(ProgramParser, ModuleWithEntryFieldIsInvalidArgument) {
  ExpectInvalid(Prog({With(Module(), "entry", "main")}), "instructions[0].entry: unknown field");
}

TEST(ProgramParser, ModuleWithoutSourceIsInvalidArgument) {
  ExpectInvalid(Prog({Without(Module(), "source")}), "instructions[0].source: missing");
}

TEST(ProgramParser, NonStringSourceIsInvalidArgument) {
  ExpectInvalid(Prog({With(Module(), "source", 3)}), "instructions[0].source:");
}

TEST(ProgramParser, UnknownModuleLanguageIsInvalidArgument) {
  ExpectInvalid(Prog({With(Module(), "language", "rust")}), "instructions[0].language:");
}

TEST(ProgramParser, NonStringModuleLanguageIsInvalidArgument) {
  ExpectInvalid(Prog({With(Module(), "language", nullptr)}), "instructions[0].language:");
}

TEST(ProgramParser, LanguageOnBytesUploadIsInvalidArgument) {
  ExpectInvalid(Prog({With(BlobUpload("bytes", "b"), "language", "python")}),
                "instructions[0].language: unknown field");
}

TEST(ProgramParser, TensorWithExtraFieldIsInvalidArgument) {
  ExpectInvalid(Prog({With(Tensor(), "device", "cuda")}), "instructions[0].device:");
}

TEST(ProgramParser, TensorWithoutShapeIsInvalidArgument) {
  ExpectInvalid(Prog({Without(Tensor(), "shape")}), "instructions[0].shape: missing");
}

TEST(ProgramParser, TensorWithoutDtypeIsInvalidArgument) {
  ExpectInvalid(Prog({Without(Tensor(), "dtype")}), "instructions[0].dtype: missing");
}

TEST(ProgramParser, BytesWithPathIsInvalidArgument) {
  ExpectInvalid(Prog({With(BlobUpload("bytes", "b"), "path", "x")}),
                "instructions[0].path: unknown field");
}

TEST(ProgramParser, LibraryWithEntryIsInvalidArgument) {
  ExpectInvalid(Prog({With(BlobUpload("library", "l"), "entry", "main")}),
                "instructions[0].entry:");
}

TEST(ProgramParser, LibraryWithoutBlobIsInvalidArgument) {
  ExpectInvalid(Prog({Without(BlobUpload("library", "l"), "blob")}),
                "instructions[0].blob: missing");
}

TEST(ProgramParser, FileUploadWithoutIdIsInvalidArgument) {
  ExpectInvalid(Prog({Without(FileUpload("f", "x"), "id")}), "instructions[0].id: missing");
}

TEST(ProgramParser, FileUploadWithoutPathIsInvalidArgument) {
  ExpectInvalid(Prog({Without(FileUpload("f", "x"), "path")}), "instructions[0].path: missing");
}

TEST(ProgramParser, GetFunctionWithExtraFieldIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(GetFunction(), "entry", "x")}), "instructions[1].entry:");
}

TEST(ProgramParser, GetFunctionWithoutNameIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), Without(GetFunction(), "name")}), "instructions[1].name: missing");
}

TEST(ProgramParser, GetFunctionWithEmptyNameIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(GetFunction(), "name", "")}),
                "instructions[1].name: expected a non-empty string");
}

TEST(ProgramParser, NonBoolCpuOnlyIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(GetFunction(), "cpu_only", 1)}),
                "instructions[1].cpu_only: expected a boolean");
}

TEST(ProgramParser, StringCpuOnlyIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(GetFunction(), "cpu_only", "true")}),
                "instructions[1].cpu_only:");
}

TEST(ProgramParser, RunWithGpuFieldIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), GetFunction(), With(RunOp(), "gpu", "auto")}),
                "instructions[2].gpu: unknown field");
}

TEST(ProgramParser, RunWithoutFnIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), GetFunction(), Without(RunOp(), "fn")}),
                "instructions[2].fn: missing");
}

TEST(ProgramParser, RunArgsNotAnArrayIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), GetFunction(), With(RunOp(), "args", {{"a", 1}})}),
                "instructions[2].args: expected an array");
}

TEST(ProgramParser, ValueReturnWithIdIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(ValueReturn("k", "m"), "id", "r")}),
                "instructions[1].id: unknown field");
}

TEST(ProgramParser, ValueReturnWithPathIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(ValueReturn("k", "m"), "path", "x")}),
                "instructions[1].path: unknown field");
}

TEST(ProgramParser, ReturnWithoutValueIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), Without(ValueReturn("k", "m"), "value")}),
                "instructions[1].value: missing");
}

TEST(ProgramParser, FileReturnWithValueIsInvalidArgument) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "file"}, {"path", "x"}, {"value", 1}};
  ExpectInvalid(Prog({ret}), "instructions[0].value: unknown field");
}

TEST(ProgramParser, FileReturnWithoutPathIsInvalidArgument) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "folder"}};
  ExpectInvalid(Prog({ret}), "instructions[0].path: missing");
}

TEST(ProgramParser, ValueKindReturnIsInvalidArgument) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "value"}, {"path", "x"}};
  ExpectInvalid(Prog({ret}), "instructions[0].kind:");
}

TEST(ProgramParser, ReturnPathNumberIsInvalidArgument) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "file"}, {"path", 3}};
  ExpectInvalid(Prog({ret}), "instructions[0].path:");
}

TEST(ProgramParser, ReturnLiteralPathWithDotDotIsInvalidArgument) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "folder"}, {"path", "a/../b"}};
  ExpectInvalid(Prog({ret}), "instructions[0].path:");
}

TEST(ProgramParser, ReturnAbsolutePathIsInvalidArgument) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "file"}, {"path", "/etc/passwd"}};
  ExpectInvalid(Prog({ret}), "instructions[0].path:");
}

// --- Ids, keys and references -------------------------------------------------

TEST(ProgramParser, MissingIdIsInvalidArgument) {
  ExpectInvalid(Prog({Without(Module(), "id")}), "instructions[0].id: missing");
}

TEST(ProgramParser, EmptyIdIsInvalidArgument) {
  ExpectInvalid(Prog({Module("")}), "instructions[0].id: expected a non-empty string");
}

TEST(ProgramParser, NumericIdIsInvalidArgument) {
  ExpectInvalid(Prog({With(Module(), "id", 7)}), "instructions[0].id:");
}

TEST(ProgramParser, DuplicateUploadIdIsInvalidArgument) {
  ExpectInvalid(Prog({Module("m"), Module("m")}), "instructions[1].id: duplicate id 'm'");
}

TEST(ProgramParser, RunIdReusingUploadIdIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), GetFunction(), RunOp("m")}), "instructions[2].id: duplicate id");
}

TEST(ProgramParser, GetFunctionIdReusingRunIdIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), GetFunction(), RunOp(), GetFunction("y")}),
                "instructions[3].id: duplicate id 'y'");
}

TEST(ProgramParser, DuplicateReturnKeyIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), ValueReturn("k", "m"), ValueReturn("k", "m")}),
                "instructions[2].key: duplicate return key 'k'");
}

TEST(ProgramParser, EmptyReturnKeyIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), ValueReturn("", "m")}), "instructions[1].key:");
}

TEST(ProgramParser, MissingReturnKeyIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), Without(ValueReturn("k", "m"), "key")}),
                "instructions[1].key: missing");
}

TEST(ProgramParser, ForwardReferenceIsInvalidArgument) {
  ExpectInvalid(Prog({GetFunction(), Module()}),
                "instructions[0].module: references unknown/forward handle 'm'");
}

TEST(ProgramParser, UnknownReferenceIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), GetFunction("f", "nope")}),
                "references unknown/forward handle 'nope'");
}

TEST(ProgramParser, SelfReferenceIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), GetFunction(), RunOp("y", "y")}),
                "instructions[2].fn: references unknown/forward handle 'y'");
}

TEST(ProgramParser, ReferenceToReturnKeyIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), ValueReturn("k", "m"), ValueReturn("k2", "k")}),
                "references unknown/forward handle 'k'");
}

TEST(ProgramParser, BuiltinStringFnIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(RunOp(), "fn", "builtin.randn")}),
                "instructions[1].fn: expected a reference");
}

TEST(ProgramParser, ModuleAsStringIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(GetFunction(), "module", "m")}),
                "instructions[1].module: expected a reference");
}

TEST(ProgramParser, ReferenceWithExtraKeyIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(GetFunction(), "module", {{"$ref", "m"}, {"x", 1}})}),
                "instructions[1].module: expected a reference");
}

TEST(ProgramParser, ReferenceWithEmptyNameIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(GetFunction(), "module", {{"$ref", ""}})}),
                "instructions[1].module: expected a reference");
}

TEST(ProgramParser, ReferenceWithNumberNameIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(GetFunction(), "module", {{"$ref", 1}})}),
                "instructions[1].module: expected a reference");
}

TEST(ProgramParser, ReturnValueLiteralIsInvalidArgument) {
  ExpectInvalid(Prog({Module(), With(ValueReturn("k", "m"), "value", 5)}),
                "instructions[1].value: expected a reference");
}

TEST(ProgramParser, ForwardReferenceInReturnValueIsInvalidArgument) {
  ExpectInvalid(Prog({ValueReturn("k", "m"), Module()}),
                "instructions[0].value: references unknown/forward handle 'm'");
}

TEST(ProgramParser, ForwardReferenceInTopLevelArgIsInvalidArgument) {
  json args = json::array({1, {{"$ref", "later"}}});
  ExpectInvalid(Prog({Module(), GetFunction(), With(RunOp(), "args", args), Module("later")}),
                "instructions[2].args[1]: references unknown/forward handle 'later'");
}

TEST(ProgramParser, ForwardReferenceInReturnPathIsInvalidArgument) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "file"}, {"path", {{"$ref", "f"}}}};
  ExpectInvalid(Prog({ret, FileUpload("f", "x")}),
                "instructions[0].path: references unknown/forward handle 'f'");
}

TEST(ProgramParser, ReturnPathObjectNotReferenceIsInvalidArgument) {
  json ret = {{"op", "return"}, {"key", "r"}, {"kind", "file"}, {"path", {{"p", "x"}}}};
  ExpectInvalid(Prog({ret}), "instructions[0].path:");
}

// --- Blobs, dtypes and shapes -----------------------------------------------

TEST(ProgramParser, UppercaseBlobIsInvalidArgument) {
  ExpectInvalid(Prog({BlobUpload("bytes", "b", std::string(64, 'A'))}), "instructions[0].blob:");
}

TEST(ProgramParser, ShortBlobIsInvalidArgument) {
  ExpectInvalid(Prog({BlobUpload("bytes", "b", std::string(63, 'a'))}), "instructions[0].blob:");
}

TEST(ProgramParser, NonHexBlobIsInvalidArgument) {
  ExpectInvalid(Prog({BlobUpload("bytes", "b", std::string(63, 'a') + "g")}),
                "instructions[0].blob:");
}

TEST(ProgramParser, NonStringBlobIsInvalidArgument) {
  ExpectInvalid(Prog({With(BlobUpload("bytes", "b"), "blob", 1)}), "instructions[0].blob:");
}

TEST(ProgramParser, UnknownDtypeIsInvalidArgument) {
  ExpectInvalid(Prog({Tensor("t", kHashA, {1}, "float128")}), "instructions[0].dtype:");
}

TEST(ProgramParser, TorchPrefixedDtypeIsInvalidArgument) {
  ExpectInvalid(Prog({Tensor("t", kHashA, {1}, "torch.float32")}), "instructions[0].dtype:");
}

TEST(ProgramParser, NonStringDtypeIsInvalidArgument) {
  ExpectInvalid(Prog({With(Tensor(), "dtype", 4)}), "instructions[0].dtype:");
}

TEST(ProgramParser, NegativeShapeIsInvalidArgument) {
  ExpectInvalid(Prog({Tensor("t", kHashA, {2, -1})}), "instructions[0].shape:");
}

TEST(ProgramParser, BoolInShapeIsInvalidArgument) {
  ExpectInvalid(Prog({Tensor("t", kHashA, json::array({2, true}))}), "instructions[0].shape:");
}

TEST(ProgramParser, FloatInShapeIsInvalidArgument) {
  ExpectInvalid(Prog({Tensor("t", kHashA, {2.0})}), "instructions[0].shape:");
}

TEST(ProgramParser, ShapeNotAnArrayIsInvalidArgument) {
  ExpectInvalid(Prog({With(Tensor(), "shape", 4)}), "instructions[0].shape:");
}

TEST(ProgramParser, OverflowingShapeIsInvalidArgument) {
  ExpectInvalid(Prog({Tensor("t", kHashA, {INT64_MAX, 4})}), "instructions[0].shape:");
}

TEST(ProgramParser, TensorsSharingBlobWithDifferentLengthsAreInvalidArgument) {
  ExpectInvalid(Prog({Tensor("t1", kHashA, {2}, "float32"), Tensor("t2", kHashA, {2}, "int64")}),
                "instructions[1].shape: tensor upload 't2' expects 16 bytes");
}

// --- File upload paths ------------------------------------------------------

TEST(ProgramParser, FileUploadWithDotDotIsInvalidArgument) {
  ExpectInvalid(Prog({FileUpload("f", "a/../b")}), "instructions[0].path:");
}

TEST(ProgramParser, FileUploadWithAbsolutePathIsInvalidArgument) {
  ExpectInvalid(Prog({FileUpload("f", "/tmp/x")}), "instructions[0].path:");
}

TEST(ProgramParser, FileUploadWithEmptyPathIsInvalidArgument) {
  ExpectInvalid(Prog({FileUpload("f", "")}), "instructions[0].path:");
}

TEST(ProgramParser, FileUploadWithNonStringPathIsInvalidArgument) {
  ExpectInvalid(Prog({With(FileUpload("f", "x"), "path", json::array({"x"}))}),
                "instructions[0].path:");
}

TEST(ProgramParser, DuplicateNormalizedFilePathIsInvalidArgument) {
  ExpectInvalid(Prog({FileUpload("a", "data/x.bin"), FileUpload("b", "./data//x.bin")}),
                "instructions[1].path: duplicate file path 'data/x.bin'");
}

TEST(ProgramParser, FileInsideUploadedFileIsInvalidArgument) {
  ExpectInvalid(Prog({FileUpload("a", "data"), FileUpload("b", "data/x.bin")}),
                "instructions[1].path:");
}

TEST(ProgramParser, FileAtUploadedDirectoryIsInvalidArgument) {
  ExpectInvalid(Prog({FileUpload("a", "data/sub/x.bin"), FileUpload("b", "data")}),
                "instructions[1].path:");
}

TEST(ProgramParser, FileAtNestedUploadedDirectoryIsInvalidArgument) {
  ExpectInvalid(Prog({FileUpload("a", "data/sub/x.bin"), FileUpload("b", "data/sub")}),
                "instructions[1].path:");
}

// --- NormalizeWorkspacePath ---------------------------------------------------

TEST(NormalizeWorkspacePath, DropsDotAndEmptyComponents) {
  StatusOr<std::string> path = NormalizeWorkspacePath("./data//x.bin/");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, "data/x.bin");
}

TEST(NormalizeWorkspacePath, KeepsDotsInsideNames) {
  StatusOr<std::string> path = NormalizeWorkspacePath(".hidden/..x/a..");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, ".hidden/..x/a..");
}

TEST(NormalizeWorkspacePath, KeepsUtf8Names) {
  StatusOr<std::string> path = NormalizeWorkspacePath("d\xC3\xA9j\xC3\xA0/x");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, "d\xC3\xA9j\xC3\xA0/x");
}

TEST(NormalizeWorkspacePath, EmptyIsInvalidArgument) {
  EXPECT_EQ(NormalizeWorkspacePath("").status().code(), StatusCode::kInvalidArgument);
}

TEST(NormalizeWorkspacePath, OnlyDotsIsInvalidArgument) {
  EXPECT_FALSE(NormalizeWorkspacePath("././/.").ok());
}

TEST(NormalizeWorkspacePath, NulIsInvalidArgument) {
  EXPECT_FALSE(NormalizeWorkspacePath(std::string_view("a\0b", 3)).ok());
}

TEST(NormalizeWorkspacePath, BackslashIsInvalidArgument) {
  EXPECT_FALSE(NormalizeWorkspacePath("a\\b").ok());
}

TEST(NormalizeWorkspacePath, LeadingSlashIsInvalidArgument) {
  EXPECT_FALSE(NormalizeWorkspacePath("/a").ok());
}

TEST(NormalizeWorkspacePath, DotDotIsInvalidArgument) {
  EXPECT_FALSE(NormalizeWorkspacePath("..").ok());
}

TEST(NormalizeWorkspacePath, DotDotBeforeNormalizationIsInvalidArgument) {
  EXPECT_FALSE(NormalizeWorkspacePath("a/../b").ok());
  EXPECT_FALSE(NormalizeWorkspacePath("a/b/..").ok());
  EXPECT_FALSE(NormalizeWorkspacePath("./..//x").ok());
}

TEST(NormalizeWorkspacePath, ComponentOf255BytesIsAccepted) {
  EXPECT_TRUE(NormalizeWorkspacePath(std::string(255, 'a')).ok());
}

TEST(NormalizeWorkspacePath, ComponentOf256BytesIsInvalidArgument) {
  EXPECT_FALSE(NormalizeWorkspacePath("d/" + std::string(256, 'a')).ok());
}

TEST(NormalizeWorkspacePath, PathOf4096BytesIsAccepted) {
  std::string path;
  while (path.size() < 4096 - 101)
    path += std::string(100, 'a') + "/";
  path += std::string(4096 - path.size(), 'b');
  ASSERT_EQ(path.size(), 4096u);
  EXPECT_TRUE(NormalizeWorkspacePath(path).ok());
}

TEST(NormalizeWorkspacePath, PathOver4096BytesIsInvalidArgument) {
  std::string path;
  while (path.size() < 4200)
    path += std::string(100, 'a') + "/";
  EXPECT_FALSE(NormalizeWorkspacePath(path).ok());
}

TEST(NormalizeWorkspacePath, LengthLimitAppliesAfterDroppingDots) {
  std::string path;
  for (int i = 0; i < 1500; ++i)
    path += "./";
  path += "x";
  EXPECT_TRUE(NormalizeWorkspacePath(path).ok());
}

}  // namespace
}  // namespace kc::protocol
