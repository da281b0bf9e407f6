#include "protocol/multipart_writer.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "protocol/multipart_reader.h"

namespace kc::protocol {
namespace {

constexpr std::string_view kPrefix = "multipart/form-data; boundary=";

std::string BoundaryOf(const EncodedMultipart& encoded) {
  EXPECT_EQ(encoded.content_type.rfind(kPrefix, 0), 0u) << encoded.content_type;
  return encoded.content_type.substr(kPrefix.size());
}

TEST(MultipartWriter, BoundaryIsKcoralPlus32LowercaseHex) {
  EncodedMultipart encoded = WriteMultipart({{"result", "application/json", "{}"}});
  std::string boundary = BoundaryOf(encoded);
  ASSERT_EQ(boundary.size(), 7u + 32u);
  EXPECT_EQ(boundary.substr(0, 7), "kcoral-");
  for (char c : boundary.substr(7)) {
    EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << boundary;
  }
}

TEST(MultipartWriter, WritesExactFraming) {
  EncodedMultipart encoded = WriteMultipart({{"result", "application/json", "{\"a\":1}"},
                                             {"return:0", "application/octet-stream", "xy"}});
  std::string b = BoundaryOf(encoded);
  std::string expected = "--" + b +
                         "\r\nContent-Disposition: form-data; name=\"result\"\r\n"
                         "Content-Type: application/json\r\n\r\n{\"a\":1}\r\n"
                         "--" +
                         b +
                         "\r\nContent-Disposition: form-data; name=\"return:0\"\r\n"
                         "Content-Type: application/octet-stream\r\n\r\nxy\r\n"
                         "--" +
                         b + "--\r\n";
  EXPECT_EQ(encoded.Join(), expected);
}

TEST(MultipartWriter, BoundariesDifferBetweenCalls) {
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i)
    seen.insert(BoundaryOf(WriteMultipart({{"r", "t", "x"}})));
  EXPECT_EQ(seen.size(), 20u);
}

TEST(MultipartWriter, BoundaryNeverOccursInAnyBody) {
  // A body full of "kcoral-" prefixes cannot make the writer pick a colliding boundary.
  std::string body;
  for (int i = 0; i < 100; ++i)
    body += "--kcoral-\r\n";
  for (int i = 0; i < 50; ++i) {
    EncodedMultipart encoded = WriteMultipart({{"result", "application/json", body}});
    EXPECT_EQ(body.find(BoundaryOf(encoded)), std::string::npos);
  }
}

TEST(MultipartWriter, EmptyPartListWritesOnlyTheClose) {
  EncodedMultipart encoded = WriteMultipart({});
  EXPECT_EQ(encoded.Join(), "--" + BoundaryOf(encoded) + "--\r\n");
}

TEST(MultipartWriter, RoundTripsThroughReader) {
  std::string binary("\0\r\n--kcoral-\r\n\xff\xfe", 16);
  std::vector<OutgoingPart> parts = {{"result", "application/json", "{\"status\":\"COMPLETED\"}"},
                                     {"return:0", "application/octet-stream", binary},
                                     {"return:1", "application/octet-stream", ""},
                                     {"return:2", "application/octet-stream", "\r\n"}};
  EncodedMultipart encoded = WriteMultipart(parts);
  StatusOr<std::string> boundary = MultipartBoundary(encoded.content_type);
  ASSERT_TRUE(boundary.ok()) << boundary.status().message();
  StatusOr<std::vector<MultipartPart>> read = ReadMultipart(encoded.Join(), *boundary);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ((*read)[i].name, parts[i].name);
    EXPECT_EQ((*read)[i].content_type, parts[i].content_type);
    EXPECT_EQ((*read)[i].body, parts[i].body) << i;
  }
}

}  // namespace
}  // namespace kc::protocol
