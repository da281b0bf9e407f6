#include "protocol/execute_request.h"

#include <string>

#include <gtest/gtest.h>

#include "base/sha256.h"

namespace kc::protocol {
namespace {

constexpr char kContentType[] = "multipart/form-data; boundary=XyZ";

struct TestPart {
  std::string name;
  std::string content_type;
  std::string body;
};

std::string Encode(const std::vector<TestPart>& parts) {
  std::string body;
  for (const TestPart& part : parts) {
    body += "--XyZ\r\nContent-Disposition: form-data; name=\"" + part.name +
            "\"\r\nContent-Type: " + part.content_type + "\r\n\r\n" + part.body + "\r\n";
  }
  return body + "--XyZ--\r\n";
}

const std::string kBytes = "some blob bytes";
const std::string kOther = "other bytes";

std::string ProgramUsing(const std::vector<std::string>& hashes) {
  std::string instructions;
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (i) instructions += ",";
    instructions += R"({"op":"upload","id":"b)" + std::to_string(i) +
                    R"(","kind":"bytes","blob":")" + hashes[i] + "\"}";
  }
  return "{\"instructions\":[" + instructions + "]}";
}

TestPart ProgramPart(std::string json) {
  return {"program", "application/json", std::move(json)};
}
TestPart BlobPart(const std::string& bytes) {
  return {"blob:" + Sha256Hex(bytes), "application/octet-stream", bytes};
}

StatusOr<ExecuteRequest> Parse(const std::vector<TestPart>& parts) {
  static std::string body;  // ExecuteRequest views into the body
  body = Encode(parts);
  return ParseExecuteRequest(kContentType, body);
}

void ExpectInvalid(const std::vector<TestPart>& parts, std::string_view fragment) {
  StatusOr<ExecuteRequest> request = Parse(parts);
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(request.status().message().find(fragment), std::string::npos)
      << request.status().message();
}

TEST(ExecuteRequest, ParsesProgramAndBlobs) {
  std::string program = ProgramUsing({Sha256Hex(kBytes), Sha256Hex(kOther)});
  StatusOr<ExecuteRequest> request =
      Parse({BlobPart(kOther), ProgramPart(program), BlobPart(kBytes)});
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_EQ(request->program_json, program);
  ASSERT_EQ(request->program.instructions.size(), 2u);
  ASSERT_EQ(request->blobs.size(), 2u);
  EXPECT_EQ(request->blobs[0].sha256, Sha256Hex(kOther));
  EXPECT_EQ(request->blobs[0].bytes, kOther);
  EXPECT_EQ(request->blobs[1].sha256, Sha256Hex(kBytes));
  EXPECT_EQ(request->blobs[1].bytes, kBytes);
}

TEST(ExecuteRequest, ProgramWithoutBlobPartsIsAccepted) {
  // The first attempt of the cache negotiation carries no blobs (§3.3).
  StatusOr<ExecuteRequest> request = Parse({ProgramPart(ProgramUsing({Sha256Hex(kBytes)}))});
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_TRUE(request->blobs.empty());
  ASSERT_EQ(request->program.blobs.size(), 1u);
}

TEST(ExecuteRequest, EmptyBlobIsAccepted) {
  StatusOr<ExecuteRequest> request =
      Parse({ProgramPart(ProgramUsing({Sha256Hex("")})), BlobPart("")});
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_EQ(request->blobs[0].bytes, "");
}

TEST(ExecuteRequest, JsonContentTypeIsInvalidArgument) {
  StatusOr<ExecuteRequest> request = ParseExecuteRequest("application/json", "{}");
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), StatusCode::kInvalidArgument);
}

TEST(ExecuteRequest, MissingBoundaryIsInvalidArgument) {
  EXPECT_FALSE(ParseExecuteRequest("multipart/form-data", Encode({})).ok());
}

TEST(ExecuteRequest, BrokenFramingIsInvalidArgument) {
  EXPECT_FALSE(ParseExecuteRequest(kContentType, "--XyZ\r\nno headers").ok());
}

TEST(ExecuteRequest, MissingProgramIsInvalidArgument) {
  ExpectInvalid({BlobPart(kBytes)}, "missing 'program' part");
}

TEST(ExecuteRequest, DuplicateProgramIsInvalidArgument) {
  std::string program = ProgramUsing({Sha256Hex(kBytes)});
  ExpectInvalid({ProgramPart(program), ProgramPart(program)}, "duplicate 'program' part");
}

TEST(ExecuteRequest, ProgramWithCharsetIsInvalidArgument) {
  ExpectInvalid({{"program", "application/json; charset=utf-8", ProgramUsing({Sha256Hex(kBytes)})}},
                "application/json");
}

TEST(ExecuteRequest, ProgramAsTextIsInvalidArgument) {
  ExpectInvalid({{"program", "text/plain", ProgramUsing({Sha256Hex(kBytes)})}}, "application/json");
}

TEST(ExecuteRequest, InvalidProgramIsInvalidArgument) {
  ExpectInvalid({ProgramPart(R"({"instructions":[]})")}, "instructions");
}

TEST(ExecuteRequest, ProgramWithInvalidUtf8IsInvalidArgument) {
  ExpectInvalid({ProgramPart("{\"instructions\":[{\"op\":\"upload\",\"id\":\"\xff\"}]}")}, "JSON");
}

TEST(ExecuteRequest, UnsupportedPartNameIsInvalidArgument) {
  ExpectInvalid({ProgramPart(ProgramUsing({Sha256Hex(kBytes)})), {"extra", "text/plain", "x"}},
                "unsupported multipart part 'extra'");
}

TEST(ExecuteRequest, ProgramNameIsCaseSensitive) {
  ExpectInvalid({{"Program", "application/json", ProgramUsing({Sha256Hex(kBytes)})}},
                "unsupported multipart part 'Program'");
}

TEST(ExecuteRequest, UppercaseBlobNameIsInvalidArgument) {
  std::string hash = Sha256Hex(kBytes);
  for (char& c : hash)
    c = static_cast<char>(std::toupper(c));
  ExpectInvalid({ProgramPart(ProgramUsing({Sha256Hex(kBytes)})),
                 {"blob:" + hash, "application/octet-stream", kBytes}},
                "malformed blob part name");
}

TEST(ExecuteRequest, ShortBlobNameIsInvalidArgument) {
  ExpectInvalid({ProgramPart(ProgramUsing({Sha256Hex(kBytes)})),
                 {"blob:abc", "application/octet-stream", kBytes}},
                "malformed blob part name");
}

TEST(ExecuteRequest, BlobWithWrongContentTypeIsInvalidArgument) {
  ExpectInvalid({ProgramPart(ProgramUsing({Sha256Hex(kBytes)})),
                 {"blob:" + Sha256Hex(kBytes), "application/x-binary", kBytes}},
                "application/octet-stream");
}

TEST(ExecuteRequest, DuplicateBlobIsInvalidArgument) {
  ExpectInvalid(
      {ProgramPart(ProgramUsing({Sha256Hex(kBytes)})), BlobPart(kBytes), BlobPart(kBytes)},
      "duplicate blob part");
}

TEST(ExecuteRequest, HashMismatchIsInvalidArgument) {
  ExpectInvalid({ProgramPart(ProgramUsing({Sha256Hex(kBytes)})),
                 {"blob:" + Sha256Hex(kBytes), "application/octet-stream", kBytes + "!"}},
                "does not match");
}

TEST(ExecuteRequest, UnreferencedBlobIsInvalidArgument) {
  ExpectInvalid(
      {ProgramPart(ProgramUsing({Sha256Hex(kBytes)})), BlobPart(kBytes), BlobPart(kOther)},
      "unreferenced blob part(s): " + Sha256Hex(kOther));
}

TEST(ExecuteRequest, AllUnreferencedBlobsAreListed) {
  ExpectInvalid({ProgramPart(R"({"instructions":[{"op":"upload","id":"m","kind":"module",)"
                             R"("source":""}]})"),
                 BlobPart(kBytes), BlobPart(kOther)},
                "unreferenced blob part(s): " + Sha256Hex(kBytes) + ", " + Sha256Hex(kOther));
}

TEST(ExecuteRequest, BlobPartWithFilenameIsAccepted) {
  std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"program\"\r\n"
      "Content-Type: application/json\r\n\r\n" +
      ProgramUsing({Sha256Hex(kBytes)}) +
      "\r\n--XyZ\r\nContent-Disposition: form-data; name=\"blob:" + Sha256Hex(kBytes) +
      "\"; filename=\"blob\"\r\nContent-Type: application/octet-stream\r\n\r\n" + kBytes +
      "\r\n--XyZ--\r\n";
  StatusOr<ExecuteRequest> request = ParseExecuteRequest(kContentType, body);
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_EQ(request->blobs.size(), 1u);
}

}  // namespace
}  // namespace kc::protocol
