// Fuzzes MultipartBoundary and ReadMultipart (spec/protocol.md §1.5).
//
// Input: a Content-Type line, "\n", then the body. The boundary is what
// MultipartBoundary extracts from the line, or "B" if it refuses it. Invariants:
// an accepted boundary is 1-70 boundary characters; accepted bodies yield at
// least one part, each with a non-empty name and Content-Type, bodies inside the
// input, in order and not overlapping, and no body contains a delimiter line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "protocol/multipart_reader.h"

namespace {

bool IsBoundaryChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = kc::fuzz::AsText(data, size);
  size_t newline = input.find('\n');
  std::string_view content_type = input.substr(0, newline);
  std::string_view body = newline == std::string_view::npos ? input : input.substr(newline + 1);

  std::string boundary = "B";
  kc::StatusOr<std::string> parsed_boundary = kc::protocol::MultipartBoundary(content_type);
  if (parsed_boundary.ok()) {
    KC_FUZZ_CHECK(!parsed_boundary->empty() && parsed_boundary->size() <= 70);
    KC_FUZZ_CHECK(parsed_boundary->back() != ' ');
    for (char c : *parsed_boundary)
      KC_FUZZ_CHECK(IsBoundaryChar(c));
    boundary = *parsed_boundary;
  } else {
    KC_FUZZ_CHECK(parsed_boundary.status().code() == kc::StatusCode::kInvalidArgument);
  }

  kc::StatusOr<std::vector<kc::protocol::MultipartPart>> parts =
      kc::protocol::ReadMultipart(body, boundary);
  if (!parts.ok()) {
    KC_FUZZ_CHECK(parts.status().code() == kc::StatusCode::kInvalidArgument);
    return 0;
  }
  KC_FUZZ_CHECK(!parts->empty());
  const std::string line_delimiter = "\n--" + boundary;
  const char* previous_end = body.data();
  for (const kc::protocol::MultipartPart& part : *parts) {
    KC_FUZZ_CHECK(!part.name.empty());
    KC_FUZZ_CHECK(!part.content_type.empty());
    KC_FUZZ_CHECK(kc::fuzz::Inside(part.body, body));
    if (!part.body.empty()) {
      KC_FUZZ_CHECK(part.body.data() >= previous_end);
      previous_end = part.body.data() + part.body.size();
    }
    // A delimiter line ends a part, so a body holds none that is followed by
    // "--", a line break, or blanks and a line break.
    for (size_t at = part.body.find(line_delimiter); at != std::string_view::npos;
         at = part.body.find(line_delimiter, at + 1)) {
      std::string_view rest = part.body.substr(at + line_delimiter.size());
      KC_FUZZ_CHECK(rest.substr(0, 2) != "--");
      size_t blanks = rest.find_first_not_of(" \t");
      if (blanks != std::string_view::npos) {
        KC_FUZZ_CHECK(rest[blanks] != '\n');
        KC_FUZZ_CHECK(rest.substr(blanks, 2) != "\r\n");
      }
    }
  }
  // Parsing is a pure function of its input.
  kc::StatusOr<std::vector<kc::protocol::MultipartPart>> again =
      kc::protocol::ReadMultipart(body, boundary);
  KC_FUZZ_CHECK(again.ok() && again->size() == parts->size());
  return 0;
}
