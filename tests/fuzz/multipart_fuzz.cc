// Fuzzes MultipartBoundary, ReadMultipart and MultipartStream (spec/protocol.md
// §1.5).
//
// Input: a Content-Type line, "\n", then the body. The boundary is what
// MultipartBoundary extracts from the line, or "B" if it refuses it. Invariants:
// an accepted boundary is 1-70 boundary characters; accepted bodies yield at
// least one part, each with a non-empty name and Content-Type, bodies inside the
// input, in order and not overlapping, and no body contains a delimiter line.
// MultipartStream, fed the body in two chunks split at every offset (64 offsets
// spread evenly past 4 KiB) and one byte at a time, agrees exactly with
// ReadMultipart: the same error message, or the same parts.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "protocol/multipart_reader.h"
#include "protocol/multipart_stream.h"

namespace {

bool IsBoundaryChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

struct Part {
  std::string name;
  std::string content_type;
  std::string body;
};

struct Outcome {
  kc::Status status;
  std::vector<Part> parts;
};

class CollectingSink : public kc::protocol::MultipartSink {
 public:
  kc::Status BeginPart(std::string_view name, std::string_view content_type) override {
    KC_FUZZ_CHECK(!in_part_);
    in_part_ = true;
    parts.push_back({std::string(name), std::string(content_type), ""});
    return kc::Status::Ok();
  }
  kc::Status PartData(std::string_view bytes) override {
    KC_FUZZ_CHECK(in_part_ && !bytes.empty());
    parts.back().body.append(bytes);
    return kc::Status::Ok();
  }
  kc::Status EndPart() override {
    KC_FUZZ_CHECK(in_part_);
    in_part_ = false;
    return kc::Status::Ok();
  }

  std::vector<Part> parts;

 private:
  bool in_part_ = false;
};

// Feeds `body` cut at the increasing offsets `cuts`, then finishes. After an
// error every later call must return that same error.
Outcome Stream(std::string_view body, const std::string& boundary,
               const std::vector<size_t>& cuts) {
  CollectingSink sink;
  kc::protocol::MultipartStream stream(boundary, sink);
  kc::Status first;
  size_t begin = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    size_t end = i < cuts.size() ? cuts[i] : body.size();
    kc::Status status = stream.Feed(body.substr(begin, end - begin));
    begin = end;
    if (first.ok()) first = status;
    KC_FUZZ_CHECK(status.message() == first.message());
  }
  kc::Status finish = stream.Finish();
  if (first.ok()) first = finish;
  KC_FUZZ_CHECK(finish.message() == first.message());
  if (!first.ok()) return {first, {}};
  return {first, std::move(sink.parts)};
}

void CheckSame(const kc::StatusOr<std::vector<kc::protocol::MultipartPart>>& want,
               const Outcome& got) {
  KC_FUZZ_CHECK(want.ok() == got.status.ok());
  if (!want.ok()) {
    KC_FUZZ_CHECK(got.status.code() == want.status().code());
    KC_FUZZ_CHECK(got.status.message() == want.status().message());
    return;
  }
  KC_FUZZ_CHECK(got.parts.size() == want->size());
  for (size_t i = 0; i < got.parts.size(); ++i) {
    KC_FUZZ_CHECK(got.parts[i].name == (*want)[i].name);
    KC_FUZZ_CHECK(got.parts[i].content_type == (*want)[i].content_type);
    KC_FUZZ_CHECK(got.parts[i].body == (*want)[i].body);
  }
}

// Chunk boundaries must not change anything.
void CheckStreamAgrees(std::string_view body, const std::string& boundary,
                       const kc::StatusOr<std::vector<kc::protocol::MultipartPart>>& want) {
  constexpr size_t kEverySplitUpTo = 4096;
  constexpr size_t kSpreadSplits = 64;
  if (body.size() <= kEverySplitUpTo) {
    for (size_t at = 0; at <= body.size(); ++at)
      CheckSame(want, Stream(body, boundary, {at}));
  } else {
    for (size_t i = 0; i < kSpreadSplits; ++i)
      CheckSame(want, Stream(body, boundary, {body.size() * i / (kSpreadSplits - 1)}));
  }
  std::vector<size_t> every_byte;
  for (size_t at = 1; at < body.size(); ++at)
    every_byte.push_back(at);
  CheckSame(want, Stream(body, boundary, every_byte));
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
  CheckStreamAgrees(body, boundary, parts);
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
