// Strict multipart/form-data reader (spec/protocol.md §1.5): the whole body
// fed to a MultipartStream, which holds the framing and header rules.
#include "protocol/multipart_reader.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/header_value.h"
#include "protocol/multipart_stream.h"

namespace kc::protocol {
namespace {

// RFC 2046 §5.1.1: 1 to 70 characters.
constexpr size_t kMaxBoundaryLength = 70;

bool IsBoundaryChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

// Collects the parts of a body fed as one chunk. Every piece of a part's data
// is then a view of that chunk, each right after the one before, so a part's
// body is a view of the caller's body too.
class PartCollector final : public MultipartSink {
 public:
  explicit PartCollector(std::string_view body) : body_(body) {}

  Status BeginPart(std::string_view name, std::string_view content_type) override {
    parts_.push_back({.name = std::string(name), .content_type = std::string(content_type)});
    return Status::Ok();
  }

  Status PartData(std::string_view bytes) override {
    std::string_view& part_body = parts_.back().body;
    bool inside =
        bytes.data() >= body_.data() && bytes.data() + bytes.size() <= body_.data() + body_.size();
    if (!inside || (!part_body.empty() && part_body.data() + part_body.size() != bytes.data())) {
      return InternalError("multipart part data is not the next bytes of the body");
    }
    part_body = part_body.empty()
                    ? bytes
                    : std::string_view(part_body.data(), part_body.size() + bytes.size());
    return Status::Ok();
  }

  Status EndPart() override { return Status::Ok(); }

  std::vector<MultipartPart> TakeParts() && { return std::move(parts_); }

 private:
  std::string_view body_;
  std::vector<MultipartPart> parts_;
};

}  // namespace

StatusOr<std::string> MultipartBoundary(std::string_view content_type) {
  StatusOr<HeaderValue> parsed = ParseHeaderValue(content_type);
  if (!parsed.ok() || parsed->type != "multipart/form-data") {
    return InvalidArgumentError("Content-Type must be multipart/form-data with a boundary");
  }
  std::vector<std::string> boundaries = parsed->Get("boundary");
  if (boundaries.size() != 1) {
    return InvalidArgumentError("Content-Type needs exactly one boundary parameter");
  }
  const std::string& boundary = boundaries[0];
  if (boundary.empty() || boundary.size() > kMaxBoundaryLength || boundary.back() == ' ') {
    return InvalidArgumentError("multipart boundary must be 1 to 70 characters");
  }
  for (char c : boundary) {
    if (!IsBoundaryChar(c)) return InvalidArgumentError("invalid character in multipart boundary");
  }
  return boundary;
}

StatusOr<std::vector<MultipartPart>> ReadMultipart(std::string_view body,
                                                   std::string_view boundary) {
  PartCollector collector(body);
  MultipartStream stream(std::string(boundary), collector);
  KC_RETURN_IF_ERROR(stream.Feed(body));
  KC_RETURN_IF_ERROR(stream.Finish());
  return std::move(collector).TakeParts();
}

}  // namespace kc::protocol
