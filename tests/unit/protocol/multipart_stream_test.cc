#include "protocol/multipart_stream.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "protocol/multipart_reader.h"

namespace kc::protocol {
namespace {

constexpr char kProgramHeaders[] =
    "Content-Disposition: form-data; name=\"program\"\r\nContent-Type: application/json\r\n";
constexpr char kBlobHeaders[] =
    "Content-Disposition: form-data; name=\"blob:x\"\r\nContent-Type: application/octet-stream\r\n";

std::string Part(std::string_view headers, std::string_view body) {
  return "--B\r\n" + std::string(headers) + "\r\n" + std::string(body) + "\r\n";
}
std::string Body(std::string_view parts) {
  return std::string(parts) + "--B--\r\n";
}

struct ReceivedPart {
  std::string name;
  std::string content_type;
  std::string body;
  bool ended = false;
};

// Records what the stream sends, and how much of it was not a view of the
// chunk being fed (`chunk`, when set).
class RecordingSink : public MultipartSink {
 public:
  Status BeginPart(std::string_view name, std::string_view content_type) override {
    EXPECT_TRUE(parts.empty() || parts.back().ended) << "BeginPart inside a part";
    parts.push_back({std::string(name), std::string(content_type), "", false});
    return Status::Ok();
  }
  Status PartData(std::string_view bytes) override {
    EXPECT_FALSE(bytes.empty());
    EXPECT_TRUE(!parts.empty() && !parts.back().ended) << "PartData outside a part";
    if (parts.empty()) return InternalError("PartData outside a part");
    parts.back().body.append(bytes);
    bool in_chunk =
        bytes.data() >= chunk.data() && bytes.data() + bytes.size() <= chunk.data() + chunk.size();
    if (!in_chunk) copied += bytes.size();
    if (++data_calls == fail_on_data_call) return UnavailableError("sink is full");
    return Status::Ok();
  }
  Status EndPart() override {
    EXPECT_TRUE(!parts.empty() && !parts.back().ended) << "EndPart outside a part";
    if (!parts.empty()) parts.back().ended = true;
    return Status::Ok();
  }

  std::vector<ReceivedPart> parts;
  std::string_view chunk;
  size_t copied = 0;
  int data_calls = 0;
  int fail_on_data_call = -1;
};

struct Outcome {
  Status status;
  std::vector<ReceivedPart> parts;
};

// Feeds `body` cut at `cuts` (increasing offsets), then finishes.
Outcome FeedInPieces(std::string_view body, const std::vector<size_t>& cuts,
                     std::string_view boundary = "B") {
  RecordingSink sink;
  MultipartStream stream(std::string(boundary), sink);
  Status status;
  size_t begin = 0;
  for (size_t i = 0; i <= cuts.size() && status.ok(); ++i) {
    size_t end = i < cuts.size() ? cuts[i] : body.size();
    status = stream.Feed(body.substr(begin, end - begin));
    begin = end;
  }
  if (status.ok()) status = stream.Finish();
  return {status, std::move(sink.parts)};
}

// ReadMultipart on the whole body, in the same shape.
Outcome ReadWhole(std::string_view body, std::string_view boundary = "B") {
  StatusOr<std::vector<MultipartPart>> parts = ReadMultipart(body, boundary);
  if (!parts.ok()) return {parts.status(), {}};
  Outcome outcome;
  for (const MultipartPart& part : *parts)
    outcome.parts.push_back({part.name, part.content_type, std::string(part.body), true});
  return outcome;
}

void ExpectSame(const Outcome& want, const Outcome& got, std::string_view how) {
  ASSERT_EQ(got.status.code(), want.status.code()) << how << ": " << got.status.message();
  ASSERT_EQ(got.status.message(), want.status.message()) << how;
  if (!want.status.ok()) return;
  ASSERT_EQ(got.parts.size(), want.parts.size()) << how;
  for (size_t i = 0; i < want.parts.size(); ++i) {
    EXPECT_EQ(got.parts[i].name, want.parts[i].name) << how << ", part " << i;
    EXPECT_EQ(got.parts[i].content_type, want.parts[i].content_type) << how << ", part " << i;
    EXPECT_EQ(got.parts[i].body, want.parts[i].body) << how << ", part " << i;
    EXPECT_TRUE(got.parts[i].ended) << how << ", part " << i;
  }
}

// --- Every body of multipart_reader_test.cc, in every chunking ------------------

struct Case {
  const char* what;
  std::string body;
  bool accepted;
  std::string boundary = "B";
};

std::vector<Case> ReaderCases() {
  std::string program(kProgramHeaders);
  return {
      {"two parts",
       Body(Part(kProgramHeaders, "{}") + Part(kBlobHeaders, std::string("\0\r\n\xff", 4))), true},
      {"empty body part", Body(Part(kProgramHeaders, "")), true},
      {"bare LF framing",
       "--B\nContent-Disposition: form-data; name=program\nContent-Type: application/json\n\n"
       "{\"a\":1}\n--B--\n",
       true},
      {"case-insensitive header names",
       Body(Part("content-DISPOSITION: Form-Data; NAME=\"program\"\r\n"
                 "content-type: application/json\r\n",
                 "{}")),
       true},
      {"content type trimmed",
       Body(Part("Content-Disposition: form-data; name=p\r\nContent-Type:   Application/JSON  \r\n",
                 "x")),
       true},
      {"filename ignored",
       Body(Part("Content-Disposition: form-data; name=\"blob:1\"; filename=\"x.bin\"\r\n"
                 "Content-Type: application/octet-stream\r\n",
                 "data")),
       true},
      {"quoted name",
       Body(
           Part("Content-Disposition: form-data; name=\"a\\\"b;c\"\r\nContent-Type: text/plain\r\n",
                "x")),
       true},
      {"binary encoding", Body(Part(program + "Content-Transfer-Encoding: binary\r\n", "{}")),
       true},
      {"8bit encoding", Body(Part(program + "Content-Transfer-Encoding: 8bit\r\n", "{}")), true},
      {"BINARY encoding", Body(Part(program + "Content-Transfer-Encoding: BINARY\r\n", "{}")),
       true},
      {"unknown header", Body(Part(program + "X-Extra: 1\r\n", "{}")), true},
      {"preamble and epilogue",
       "preamble text\r\n--Bnot-a-boundary\r\n" + Part(kProgramHeaders, "{}") +
           "--B--\r\nepilogue --B\r\n garbage",
       true},
      {"marker lines in body",
       Body(Part(kProgramHeaders, "line1\r\n--Bxyz\r\n--B-\r\n--B x\r\nend")), true},
      {"marker mid line", Body(Part(kProgramHeaders, "a--B\r\nb--B--")), true},
      {"transport padding", "--B \t\r\n" + program + "\r\n{}\r\n--B--", true},
      {"body ending in CR",
       "--B\nContent-Disposition: form-data; name=p\nContent-Type: t\n\nab\r\r\n--B--\n", true},
      {"close without newline", Part(kProgramHeaders, "{}") + "--B--", true},
      {"empty body", "", false},
      {"no boundary", "just some text", false},
      {"zero parts", "--B--\r\n", false},
      {"missing close", Part(kProgramHeaders, "{}"), false},
      {"truncated close", Part(kProgramHeaders, "{}") + "--B-", false},
      {"wrong boundary C", Body(Part(kProgramHeaders, "{}")), false, "C"},
      {"wrong boundary BB", Body(Part(kProgramHeaders, "{}")), false, "BB"},
      {"empty boundary", "----\r\n", false, ""},
      {"missing disposition", Body(Part("Content-Type: application/json\r\n", "{}")), false},
      {"duplicate disposition",
       Body(Part(program + "Content-Disposition: form-data; name=\"program\"\r\n", "{}")), false},
      {"attachment disposition",
       Body(Part("Content-Disposition: attachment; name=\"program\"\r\n"
                 "Content-Type: application/json\r\n",
                 "{}")),
       false},
      {"missing name",
       Body(Part("Content-Disposition: form-data; filename=\"x\"\r\n"
                 "Content-Type: application/json\r\n",
                 "{}")),
       false},
      {"empty name",
       Body(Part("Content-Disposition: form-data; name=\"\"\r\nContent-Type: application/json\r\n",
                 "{}")),
       false},
      {"duplicate name",
       Body(Part("Content-Disposition: form-data; name=a; name=b\r\n"
                 "Content-Type: application/json\r\n",
                 "{}")),
       false},
      {"malformed disposition",
       Body(Part("Content-Disposition: form-data; name\r\nContent-Type: application/json\r\n",
                 "{}")),
       false},
      {"missing content type",
       Body(Part("Content-Disposition: form-data; name=\"program\"\r\n", "{}")), false},
      {"duplicate content type", Body(Part(program + "Content-Type: application/json\r\n", "{}")),
       false},
      {"empty content type",
       Body(Part("Content-Disposition: form-data; name=p\r\nContent-Type:\r\n", "{}")), false},
      {"nested multipart",
       Body(Part("Content-Disposition: form-data; name=p\r\n"
                 "Content-Type: Multipart/Mixed; boundary=C\r\n",
                 "--C--")),
       false},
      {"base64", Body(Part(program + "Content-Transfer-Encoding: base64\r\n", "e30=")), false},
      {"quoted-printable",
       Body(Part(program + "Content-Transfer-Encoding: quoted-printable\r\n", "{}")), false},
      {"header without colon", Body(Part(program + "garbage\r\n", "{}")), false},
      {"space before colon", Body(Part(program + "X-A : 1\r\n", "{}")), false},
      {"folded header", Body(Part(program + "X-Note: one\r\n two\r\n", "{}")), false},
      {"headers without blank line", "--B\r\n" + program + "--B--\r\n", false},
      {"error names part 1", Body(Part(kProgramHeaders, "{}") + Part("Content-Type: a\r\n", "x")),
       false},
  };
}

// The body fed whole, one byte at a time, and split in two at every offset.
void ExpectEveryChunkingGives(const Outcome& want, std::string_view body,
                              std::string_view boundary) {
  ExpectSame(want, FeedInPieces(body, {}, boundary), "whole");
  std::vector<size_t> every_byte;
  for (size_t at = 1; at < body.size(); ++at)
    every_byte.push_back(at);
  ExpectSame(want, FeedInPieces(body, every_byte, boundary), "one byte at a time");
  for (size_t at = 0; at <= body.size(); ++at)
    ExpectSame(want, FeedInPieces(body, {at}, boundary), "split at " + std::to_string(at));
}

TEST(MultipartStream, ReaderCasesGiveTheSameResultWhateverTheChunking) {
  for (const Case& c : ReaderCases()) {
    SCOPED_TRACE(c.what);
    Outcome want = ReadWhole(c.body, c.boundary);
    EXPECT_EQ(want.status.ok(), c.accepted) << want.status.message();
    if (!want.status.ok()) {
      EXPECT_EQ(want.status.code(), StatusCode::kInvalidArgument);
    }
    ExpectEveryChunkingGives(want, c.body, c.boundary);
  }
}

// Corners of the framing rules beyond the reader's own tests, with the outcome
// spelled out (ReadMultipart is built on the stream, so it is no oracle here).
struct Corner {
  const char* what;
  std::string body;
  std::string first_body;  // or, when refused, the error message
  bool accepted = true;
  std::string boundary = "B";
};

TEST(MultipartStream, FramingCornersWhateverTheChunking) {
  std::string program(kProgramHeaders);
  std::vector<Corner> corners = {
      {"CR before the CRLF of a delimiter", Body(Part(kProgramHeaders, "a\r")), "a\r"},
      {"blanks, CR, CRLF", Body(Part(kProgramHeaders, "x\n--B \r\r\n--B--")), "x\n--B \r"},
      {"marker, CR, not LF", Body(Part(kProgramHeaders, "x\r\n--B\ry")), "x\r\n--B\ry"},
      {"marker, blanks, CR, not LF", Body(Part(kProgramHeaders, "x\n--B \t\rx")), "x\n--B \t\rx"},
      {"marker, dash, not dash", Body(Part(kProgramHeaders, "x\n--B-x")), "x\n--B-x"},
      {"CRLF, CR, then a delimiter", Body(Part(kProgramHeaders, "a\r\n\r")), "a\r\n\r"},
      {"LF at body start", "\n--B\r\n" + program + "\r\nv\n--B--", "v"},
      {"bad body start", "--Bx\n--B\r\n" + program + "\r\nv\r\n--B--", "v"},
      {"preamble CR LF", "\r\n--B\r\n" + program + "\r\nv\r\n--B--", "v"},
      {"boundary with dashes", "---\r\n" + program + "\r\nv\r\n-----\r\n", "v", true, "-"},
      {"boundary prefix of itself", "--aa\r\n" + program + "\r\n--a\r\n--aa--", "--a", true, "aa"},
      {"marker mid-line in the preamble", "x--B\r\n" + program + "\r\nv\r\n--B--",
       "multipart body has no parts", false},
      {"close right after delimiter", "--B\r\n--B--\r\n",
       "multipart body is missing its closing boundary", false},
      {"empty region", "--B\r\n\r\n--B--",
       "multipart part 0: headers are not ended by an empty line", false},
      {"region is one LF", "--B\r\n\n--B--",
       "multipart part 0: headers are not ended by an empty line", false},
      {"header line right before delimiter", "--B\r\ngarbage\r\n--B--",
       "multipart part 0: headers are not ended by an empty line", false},
      {"header error, then no close", "--B\r\ngarbage\r\n\r\nbody",
       "multipart body is missing its closing boundary", false},
      {"header error, then close", "--B\r\ngarbage\r\n\r\nbody\r\n--B--",
       "multipart part 0: malformed header line", false},
      {"body ends inside the padding", Part(kProgramHeaders, "v") + "--B  \r",
       "multipart body is missing its closing boundary", false},
  };
  for (const Corner& c : corners) {
    SCOPED_TRACE(c.what);
    Outcome want;
    if (c.accepted) {
      want.parts.push_back({"program", "application/json", c.first_body, true});
    } else {
      want.status = InvalidArgumentError(c.first_body);
    }
    ExpectSame(want, ReadWhole(c.body, c.boundary), "ReadMultipart");
    ExpectEveryChunkingGives(want, c.body, c.boundary);
  }
}

TEST(MultipartStream, ErrorMessagesNameThePartIndex) {
  Outcome got =
      FeedInPieces(Body(Part(kProgramHeaders, "{}") + Part("Content-Type: a\r\n", "x")), {7, 40});
  EXPECT_EQ(got.status.message(),
            "multipart part 1: expected exactly one Content-Disposition header");
}

TEST(MultipartStream, EmptyFeedsChangeNothing) {
  std::string body = Body(Part(kProgramHeaders, "{}"));
  Outcome got = FeedInPieces(body, {0, 0, 3, 3, body.size(), body.size()});
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  ASSERT_EQ(got.parts.size(), 1u);
  EXPECT_EQ(got.parts[0].body, "{}");
}

// --- The sink ------------------------------------------------------------------

TEST(MultipartStream, SinkErrorStopsTheStreamAndIsReturned) {
  RecordingSink sink;
  sink.fail_on_data_call = 1;
  MultipartStream stream("B", sink);
  std::string body = Body(Part(kProgramHeaders, "{}") + Part(kBlobHeaders, "xyz"));
  Status status = stream.Feed(body);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "sink is full");
  ASSERT_EQ(sink.parts.size(), 1u);
  EXPECT_FALSE(sink.parts[0].ended);  // nothing after the failing call
  EXPECT_EQ(sink.data_calls, 1);

  Status again = stream.Feed("more");
  EXPECT_EQ(again.code(), StatusCode::kUnavailable);
  EXPECT_EQ(again.message(), "sink is full");
  EXPECT_EQ(stream.Finish().message(), "sink is full");
  EXPECT_EQ(sink.data_calls, 1);
}

TEST(MultipartStream, FramingErrorIsReturnedByEveryLaterCall) {
  RecordingSink sink;
  MultipartStream stream("B", sink);
  EXPECT_TRUE(stream.Feed("--B\r\nContent-Type: a\r\n\r\nx\r\n").ok());  // reported at its end
  Status status = stream.Feed("--B--");
  EXPECT_EQ(status.message(), "multipart part 0: expected exactly one Content-Disposition header");
  EXPECT_EQ(stream.Feed(Part(kProgramHeaders, "{}")).message(), status.message());
  EXPECT_EQ(stream.Finish().message(), status.message());
  EXPECT_TRUE(sink.parts.empty());
}

TEST(MultipartStream, PartsArriveBeginDataEnd) {
  RecordingSink sink;
  MultipartStream stream("B", sink);
  std::string body = Body(Part(kProgramHeaders, "{}") + Part(kBlobHeaders, "xyz"));
  size_t split = body.find("xyz") + 1;
  ASSERT_TRUE(stream.Feed(body.substr(0, split)).ok());
  ASSERT_EQ(sink.parts.size(), 2u);
  EXPECT_TRUE(sink.parts[0].ended);
  EXPECT_EQ(sink.parts[1].name, "blob:x");
  EXPECT_EQ(sink.parts[1].body, "x");
  EXPECT_FALSE(sink.parts[1].ended);
  ASSERT_TRUE(stream.Feed(body.substr(split)).ok());
  EXPECT_TRUE(sink.parts[1].ended);
  EXPECT_EQ(sink.parts[1].body, "xyz");
  EXPECT_TRUE(stream.Finish().ok());
}

TEST(MultipartStream, ChunksAfterTheCloseDelimiterAreIgnored) {
  RecordingSink sink;
  MultipartStream stream("B", sink);
  ASSERT_TRUE(stream.Feed(Body(Part(kProgramHeaders, "{}"))).ok());
  EXPECT_TRUE(stream.Feed("epilogue\r\n").ok());
  EXPECT_TRUE(stream.Feed(Part(kBlobHeaders, "not a part")).ok());
  EXPECT_TRUE(stream.Feed("--B--\r\n").ok());
  EXPECT_TRUE(stream.Finish().ok());
  ASSERT_EQ(sink.parts.size(), 1u);
}

TEST(MultipartStream, InvalidHeaderBlockIsNeverBegun) {
  RecordingSink sink;
  MultipartStream stream("B", sink);
  EXPECT_TRUE(stream.Feed("--B\r\nContent-Type: a\r\n\r\n" + std::string(1000, 'x')).ok());
  EXPECT_TRUE(sink.parts.empty());
  EXPECT_EQ(sink.data_calls, 0);
}

// --- Streaming large bodies ---------------------------------------------------

// Bytes that often look like the start of a delimiter: LFs, CRs, dashes and
// the boundary's letters, so that chunk ends fall inside near-misses.
std::string NearMisses(size_t size, std::string_view boundary) {
  std::string alphabet = "\r\n-- \tx" + std::string(boundary);
  std::string bytes(size, '\0');
  uint32_t state = 12345;
  for (char& c : bytes) {
    state = state * 1103515245u + 12345u;
    c = alphabet[(state >> 16) % alphabet.size()];
  }
  return bytes;
}

TEST(MultipartStream, LargePartArrivesAsViewsOfTheFedChunks) {
  const std::string boundary = "kcoral-7f3a9c2e1b5d";
  std::string payload = NearMisses(5 * 1024 * 1024 + 17, boundary);
  std::string body =
      "--" + boundary + "\r\n" + kBlobHeaders + "\r\n" + payload + "\r\n--" + boundary + "--\r\n";
  ASSERT_TRUE(ReadMultipart(body, boundary).ok());

  RecordingSink sink;
  MultipartStream stream(boundary, sink);
  constexpr size_t kChunk = 1024 * 1024;
  size_t chunks = 0;
  for (size_t at = 0; at < body.size(); at += kChunk, ++chunks) {
    sink.chunk = std::string_view(body).substr(at, kChunk);
    ASSERT_TRUE(stream.Feed(sink.chunk).ok());
  }
  ASSERT_TRUE(stream.Finish().ok());
  ASSERT_EQ(sink.parts.size(), 1u);
  EXPECT_EQ(sink.parts[0].body, payload);
  // Only the bytes held at a chunk's end, and the few that decide them, are copies.
  EXPECT_LE(sink.copied, chunks * 2 * (boundary.size() + 8)) << chunks << " chunks";
}

TEST(MultipartStream, LargeNearMissBodiesGiveTheReadersResultInOddChunks) {
  for (std::string_view boundary : {"B", "-", "ab"}) {
    std::string body = NearMisses(300000, boundary);
    for (size_t chunk : {1000u, 4093u, 65536u}) {
      std::vector<size_t> cuts;
      for (size_t at = chunk; at < body.size(); at += chunk)
        cuts.push_back(at);
      ExpectSame(ReadWhole(body, boundary), FeedInPieces(body, cuts, boundary),
                 std::string(boundary) + " in chunks of " + std::to_string(chunk));
    }
  }
}

TEST(MultipartStream, LongBlankRunAfterAMarker) {
  std::string blanks = NearMisses(3 * 1024 * 1024, "");
  for (char& c : blanks)
    c = c == '\t' ? '\t' : ' ';
  std::string head = "--B\r\n" + std::string(kProgramHeaders) + "\r\nv\r\n--B";
  // Blanks then a line break: a delimiter line with transport padding.
  std::string padded =
      Part(kProgramHeaders, "v") + "--B" + blanks + "\r\n" + kBlobHeaders + "\r\nw\r\n--B--";
  // Blanks then anything else: the marker line is part data.
  std::string data = head + blanks + "x\r\n--B--";
  for (const std::string* body : {&padded, &data}) {
    Outcome want = ReadWhole(*body);
    ASSERT_TRUE(want.status.ok()) << want.status.message();
    for (size_t chunk : {1024u * 1024u, 4096u}) {
      std::vector<size_t> cuts;
      for (size_t at = chunk; at < body->size(); at += chunk)
        cuts.push_back(at);
      ExpectSame(want, FeedInPieces(*body, cuts), "chunks of " + std::to_string(chunk));
    }
  }
  EXPECT_EQ(ReadWhole(padded).parts.size(), 2u);
  EXPECT_EQ(ReadWhole(data).parts[0].body, "v\r\n--B" + blanks + "x");
}

// --- Header block limit -------------------------------------------------------

std::string WithHeaderBlockOf(size_t size) {
  std::string filler = "X-Filler: ";
  std::string tail = "\r\n" + std::string(kProgramHeaders) + "\r\n";
  filler.append(size - filler.size() - tail.size(), 'f');
  return Body("--B\r\n" + filler + tail + "{}\r\n");
}

TEST(MultipartStream, HeaderBlockOf64KiBIsAccepted) {
  std::string body = WithHeaderBlockOf(kMaxPartHeaderBlock);
  Outcome got = FeedInPieces(body, {1000, 40000, 65540});
  ASSERT_TRUE(got.status.ok()) << got.status.message();
  EXPECT_EQ(got.parts[0].body, "{}");
}

TEST(MultipartStream, HeaderBlockOver64KiBIsRefused) {
  std::string body = WithHeaderBlockOf(kMaxPartHeaderBlock + 1);
  for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{{}, {1000, 65540}}) {
    Outcome got = FeedInPieces(body, cuts);
    EXPECT_EQ(got.status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(got.status.message(), "multipart part 0: header block exceeds 64 KiB");
  }
  EXPECT_EQ(ReadWhole(body).status.message(), "multipart part 0: header block exceeds 64 KiB");
}

TEST(MultipartStream, EndlessHeaderBlockIsRefusedBeforeTheBodyEnds) {
  RecordingSink sink;
  MultipartStream stream("B", sink);
  ASSERT_TRUE(stream.Feed(Part(kProgramHeaders, "{}")).ok());
  ASSERT_TRUE(stream.Feed("--B\r\nX: ").ok());
  Status status;
  for (int i = 0; i < 100 && status.ok(); ++i)
    status = stream.Feed(std::string(1024, 'h'));
  EXPECT_EQ(status.message(), "multipart part 1: header block exceeds 64 KiB");
}

// --- Finish -------------------------------------------------------------------

TEST(MultipartStream, FinishNeedsTheCloseDelimiter) {
  RecordingSink sink;
  MultipartStream stream("B", sink);
  ASSERT_TRUE(stream.Feed(Part(kProgramHeaders, "{}") + "--B").ok());
  EXPECT_EQ(stream.Finish().message(), "multipart body is missing its closing boundary");
  EXPECT_EQ(stream.Finish().message(), "multipart body is missing its closing boundary");
}

TEST(MultipartStream, EmptyBoundaryIsRefusedByEveryCall) {
  RecordingSink sink;
  MultipartStream stream("", sink);
  EXPECT_EQ(stream.Feed("----\r\n").message(), "empty multipart boundary");
  EXPECT_EQ(stream.Finish().message(), "empty multipart boundary");
}

}  // namespace
}  // namespace kc::protocol
