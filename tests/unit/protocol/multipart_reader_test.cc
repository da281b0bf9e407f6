#include "protocol/multipart_reader.h"

#include <string>

#include <gtest/gtest.h>

namespace kc::protocol {
namespace {

constexpr char kProgramHeaders[] =
    "Content-Disposition: form-data; name=\"program\"\r\nContent-Type: application/json\r\n";

std::string Part(std::string_view headers, std::string_view body) {
  return "--B\r\n" + std::string(headers) + "\r\n" + std::string(body) + "\r\n";
}
std::string Body(std::string_view parts) {
  return std::string(parts) + "--B--\r\n";
}

StatusOr<std::vector<MultipartPart>> Read(std::string_view body) {
  return ReadMultipart(body, "B");
}

void ExpectInvalid(std::string_view body, std::string_view fragment = "") {
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_FALSE(parts.ok()) << body;
  EXPECT_EQ(parts.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parts.status().message().find(fragment), std::string::npos) << parts.status().message();
}

// --- MultipartBoundary --------------------------------------------------------

TEST(MultipartBoundary, ExtractsUnquotedBoundary) {
  StatusOr<std::string> boundary = MultipartBoundary("multipart/form-data; boundary=abc123");
  ASSERT_TRUE(boundary.ok());
  EXPECT_EQ(*boundary, "abc123");
}

TEST(MultipartBoundary, ExtractsQuotedBoundary) {
  StatusOr<std::string> boundary = MultipartBoundary("multipart/form-data; boundary=\"a b:c\"");
  ASSERT_TRUE(boundary.ok());
  EXPECT_EQ(*boundary, "a b:c");
}

TEST(MultipartBoundary, TypeAndParameterNameAreCaseInsensitive) {
  StatusOr<std::string> boundary = MultipartBoundary("Multipart/Form-Data;BOUNDARY=XyZ");
  ASSERT_TRUE(boundary.ok());
  EXPECT_EQ(*boundary, "XyZ");
}

TEST(MultipartBoundary, OtherParametersAreIgnored) {
  StatusOr<std::string> boundary =
      MultipartBoundary("multipart/form-data; charset=utf-8; boundary=q ; x=\"y\"");
  ASSERT_TRUE(boundary.ok());
  EXPECT_EQ(*boundary, "q");
}

TEST(MultipartBoundary, JsonContentTypeIsInvalidArgument) {
  EXPECT_EQ(MultipartBoundary("application/json").status().code(), StatusCode::kInvalidArgument);
}

TEST(MultipartBoundary, MixedMultipartIsInvalidArgument) {
  EXPECT_FALSE(MultipartBoundary("multipart/mixed; boundary=x").ok());
}

TEST(MultipartBoundary, EmptyHeaderIsInvalidArgument) {
  EXPECT_FALSE(MultipartBoundary("").ok());
}

TEST(MultipartBoundary, MissingBoundaryIsInvalidArgument) {
  EXPECT_FALSE(MultipartBoundary("multipart/form-data").ok());
}

TEST(MultipartBoundary, EmptyBoundaryIsInvalidArgument) {
  EXPECT_FALSE(MultipartBoundary("multipart/form-data; boundary=").ok());
  EXPECT_FALSE(MultipartBoundary("multipart/form-data; boundary=\"\"").ok());
}

TEST(MultipartBoundary, DuplicateBoundaryIsInvalidArgument) {
  EXPECT_FALSE(MultipartBoundary("multipart/form-data; boundary=a; boundary=b").ok());
}

TEST(MultipartBoundary, BoundaryOver70CharactersIsInvalidArgument) {
  EXPECT_TRUE(MultipartBoundary("multipart/form-data; boundary=" + std::string(70, 'x')).ok());
  EXPECT_FALSE(MultipartBoundary("multipart/form-data; boundary=" + std::string(71, 'x')).ok());
}

TEST(MultipartBoundary, UnterminatedQuoteIsInvalidArgument) {
  EXPECT_FALSE(MultipartBoundary("multipart/form-data; boundary=\"abc").ok());
}

TEST(MultipartBoundary, InvalidBoundaryCharacterIsInvalidArgument) {
  EXPECT_FALSE(MultipartBoundary("multipart/form-data; boundary=\"a\\\"b\"").ok());
}

// --- ReadMultipart: accepted framing ------------------------------------------

TEST(MultipartReader, ReadsTwoParts) {
  std::string body =
      Body(Part(kProgramHeaders, "{}") + Part("Content-Disposition: form-data; name=\"blob:x\"\r\n"
                                              "Content-Type: application/octet-stream\r\n",
                                              std::string("\0\r\n\xff", 4)));
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "program");
  EXPECT_EQ((*parts)[0].content_type, "application/json");
  EXPECT_EQ((*parts)[0].body, "{}");
  EXPECT_EQ((*parts)[1].name, "blob:x");
  EXPECT_EQ((*parts)[1].body, std::string_view("\0\r\n\xff", 4));
}

TEST(MultipartReader, EmptyBodyPartIsAccepted) {
  StatusOr<std::vector<MultipartPart>> parts = Read(Body(Part(kProgramHeaders, "")));
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ((*parts)[0].body, "");
}

TEST(MultipartReader, BareLfFramingIsAccepted) {
  std::string body =
      "--B\nContent-Disposition: form-data; name=program\nContent-Type: application/json\n\n"
      "{\"a\":1}\n--B--\n";
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ((*parts)[0].body, "{\"a\":1}");
  EXPECT_EQ((*parts)[0].name, "program");
}

TEST(MultipartReader, HeaderNamesAreCaseInsensitive) {
  std::string body = Body(
      Part("content-DISPOSITION: Form-Data; NAME=\"program\"\r\ncontent-type: application/json\r\n",
           "{}"));
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ((*parts)[0].name, "program");
}

TEST(MultipartReader, ContentTypeIsKeptAsSentButTrimmed) {
  std::string body = Body(Part(
      "Content-Disposition: form-data; name=p\r\nContent-Type:   Application/JSON  \r\n", "x"));
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[0].content_type, "Application/JSON");
}

TEST(MultipartReader, FilenameParameterIsIgnored) {
  std::string body =
      Body(Part("Content-Disposition: form-data; name=\"blob:1\"; filename=\"x.bin\"\r\n"
                "Content-Type: application/octet-stream\r\n",
                "data"));
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ((*parts)[0].name, "blob:1");
}

TEST(MultipartReader, QuotedNameWithEscapesAndSemicolonIsUnquoted) {
  std::string body = Body(Part(
      "Content-Disposition: form-data; name=\"a\\\"b;c\"\r\nContent-Type: text/plain\r\n", "x"));
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ((*parts)[0].name, "a\"b;c");
}

TEST(MultipartReader, BinaryAnd8bitTransferEncodingsAreAccepted) {
  for (const char* encoding : {"binary", "8bit", "BINARY"}) {
    std::string body = Body(Part(
        std::string(kProgramHeaders) + "Content-Transfer-Encoding: " + encoding + "\r\n", "{}"));
    EXPECT_TRUE(Read(body).ok()) << encoding;
  }
}

TEST(MultipartReader, UnknownHeadersAreIgnored) {
  std::string body = Body(Part(std::string(kProgramHeaders) + "X-Extra: 1\r\n", "{}"));
  EXPECT_TRUE(Read(body).ok());
}

TEST(MultipartReader, PreambleAndEpilogueAreIgnored) {
  std::string body = "preamble text\r\n--Bnot-a-boundary\r\n" + Part(kProgramHeaders, "{}") +
                     "--B--\r\nepilogue --B\r\n garbage";
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].body, "{}");
}

TEST(MultipartReader, LineStartingWithBoundaryMarkerIsPartOfBody) {
  std::string payload = "line1\r\n--Bxyz\r\n--B-\r\n--B x\r\nend";
  StatusOr<std::vector<MultipartPart>> parts = Read(Body(Part(kProgramHeaders, payload)));
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].body, payload);
}

TEST(MultipartReader, BoundaryMarkerMidLineIsPartOfBody) {
  std::string payload = "a--B\r\nb--B--";
  StatusOr<std::vector<MultipartPart>> parts = Read(Body(Part(kProgramHeaders, payload)));
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[0].body, payload);
}

TEST(MultipartReader, TransportPaddingAfterBoundaryIsAccepted) {
  std::string body = "--B \t\r\n" + std::string(kProgramHeaders) + "\r\n{}\r\n--B--";
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ((*parts)[0].body, "{}");
}

TEST(MultipartReader, BodyEndingInCarriageReturnKeepsItWithBareLf) {
  std::string body =
      "--B\nContent-Disposition: form-data; name=p\nContent-Type: t\n\nab\r\r\n--B--\n";
  StatusOr<std::vector<MultipartPart>> parts = Read(body);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[0].body, "ab\r");
}

TEST(MultipartReader, CloseWithoutTrailingNewlineIsAccepted) {
  std::string body = Part(kProgramHeaders, "{}") + "--B--";
  EXPECT_TRUE(Read(body).ok());
}

// --- ReadMultipart: refused framing ------------------------------------------

TEST(MultipartReader, EmptyBodyIsInvalidArgument) {
  ExpectInvalid("", "no boundary");
}

TEST(MultipartReader, BodyWithoutBoundaryIsInvalidArgument) {
  ExpectInvalid("just some text", "no boundary");
}

TEST(MultipartReader, ZeroPartsIsInvalidArgument) {
  ExpectInvalid("--B--\r\n", "no parts");
}

TEST(MultipartReader, MissingCloseDelimiterIsInvalidArgument) {
  ExpectInvalid(Part(kProgramHeaders, "{}"), "closing boundary");
}

TEST(MultipartReader, TruncatedCloseDelimiterIsInvalidArgument) {
  ExpectInvalid(Part(kProgramHeaders, "{}") + "--B-", "closing boundary");
}

TEST(MultipartReader, WrongBoundaryIsInvalidArgument) {
  std::string body = Body(Part(kProgramHeaders, "{}"));
  EXPECT_FALSE(ReadMultipart(body, "C").ok());
  EXPECT_FALSE(ReadMultipart(body, "BB").ok());
}

TEST(MultipartReader, EmptyBoundaryArgumentIsInvalidArgument) {
  EXPECT_FALSE(ReadMultipart("----\r\n", "").ok());
}

TEST(MultipartReader, MissingContentDispositionIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Type: application/json\r\n", "{}")), "Content-Disposition");
}

TEST(MultipartReader, DuplicateContentDispositionIsInvalidArgument) {
  ExpectInvalid(Body(Part(std::string(kProgramHeaders) +
                              "Content-Disposition: form-data; name=\"program\"\r\n",
                          "{}")),
                "Content-Disposition");
}

TEST(MultipartReader, NonFormDataDispositionIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Disposition: attachment; name=\"program\"\r\n"
                          "Content-Type: application/json\r\n",
                          "{}")),
                "form-data");
}

TEST(MultipartReader, MissingNameIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Disposition: form-data; filename=\"x\"\r\n"
                          "Content-Type: application/json\r\n",
                          "{}")),
                "name");
}

TEST(MultipartReader, EmptyNameIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Disposition: form-data; name=\"\"\r\n"
                          "Content-Type: application/json\r\n",
                          "{}")),
                "name");
}

TEST(MultipartReader, DuplicateNameParameterIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Disposition: form-data; name=a; name=b\r\n"
                          "Content-Type: application/json\r\n",
                          "{}")),
                "name");
}

TEST(MultipartReader, MalformedDispositionParameterIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Disposition: form-data; name\r\n"
                          "Content-Type: application/json\r\n",
                          "{}")),
                "Content-Disposition");
}

TEST(MultipartReader, MissingContentTypeIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Disposition: form-data; name=\"program\"\r\n", "{}")),
                "Content-Type");
}

TEST(MultipartReader, DuplicateContentTypeIsInvalidArgument) {
  ExpectInvalid(
      Body(Part(std::string(kProgramHeaders) + "Content-Type: application/json\r\n", "{}")),
      "Content-Type");
}

TEST(MultipartReader, EmptyContentTypeIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Disposition: form-data; name=p\r\nContent-Type:\r\n", "{}")),
                "Content-Type");
}

TEST(MultipartReader, NestedMultipartIsInvalidArgument) {
  ExpectInvalid(Body(Part("Content-Disposition: form-data; name=p\r\n"
                          "Content-Type: Multipart/Mixed; boundary=C\r\n",
                          "--C--")),
                "nested multipart");
}

TEST(MultipartReader, Base64TransferEncodingIsInvalidArgument) {
  ExpectInvalid(
      Body(Part(std::string(kProgramHeaders) + "Content-Transfer-Encoding: base64\r\n", "e30=")),
      "Content-Transfer-Encoding");
}

TEST(MultipartReader, QuotedPrintableTransferEncodingIsInvalidArgument) {
  ExpectInvalid(
      Body(Part(std::string(kProgramHeaders) + "Content-Transfer-Encoding: quoted-printable\r\n",
                "{}")),
      "Content-Transfer-Encoding");
}

TEST(MultipartReader, HeaderWithoutColonIsInvalidArgument) {
  ExpectInvalid(Body(Part(std::string(kProgramHeaders) + "garbage\r\n", "{}")), "header");
}

TEST(MultipartReader, HeaderWithSpaceBeforeColonIsInvalidArgument) {
  ExpectInvalid(Body(Part(std::string(kProgramHeaders) + "X-A : 1\r\n", "{}")), "header");
}

TEST(MultipartReader, FoldedHeaderIsInvalidArgument) {
  ExpectInvalid(Body(Part(std::string(kProgramHeaders) + "X-Note: one\r\n two\r\n", "{}")),
                "folded");
}

TEST(MultipartReader, HeadersWithoutBlankLineIsInvalidArgument) {
  ExpectInvalid("--B\r\n" + std::string(kProgramHeaders) + "--B--\r\n", "empty line");
}

TEST(MultipartReader, ErrorNamesThePartIndex) {
  std::string body = Body(Part(kProgramHeaders, "{}") + Part("Content-Type: a\r\n", "x"));
  ExpectInvalid(body, "multipart part 1:");
}

}  // namespace
}  // namespace kc::protocol
