// Strict multipart/form-data reader (spec/protocol.md §1.5; RFC 2046 §5.1.1,
// RFC 7578). A delimiter line is "--" + boundary at the start of the body or
// right after a LF, followed either by "--" (the close delimiter) or by
// optional spaces/tabs and a CRLF or bare LF. The line break before a
// delimiter belongs to the delimiter, not to the part body.
#include "protocol/multipart_reader.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/header_value.h"

namespace kc::protocol {
namespace {

// RFC 2046 §5.1.1: 1 to 70 characters.
constexpr size_t kMaxBoundaryLength = 70;

bool IsBoundaryChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

struct Delimiter {
  size_t content_end = 0;  // end of the preceding part (before its CRLF/LF)
  size_t next = 0;         // first byte after the delimiter line
  bool close = false;
};

// Classifies the bytes after a "--boundary" found at `after`. Returns false
// if they make it an ordinary line that merely starts with the marker.
bool FinishDelimiter(std::string_view body, size_t after, Delimiter* delimiter) {
  if (body.substr(after, 2) == "--") {
    delimiter->close = true;
    delimiter->next = after + 2;  // the epilogue follows and is ignored
    return true;
  }
  while (after < body.size() && (body[after] == ' ' || body[after] == '\t'))
    ++after;
  if (body.substr(after, 2) == "\r\n") {
    delimiter->next = after + 2;
    return true;
  }
  if (body.substr(after, 1) == "\n") {
    delimiter->next = after + 1;
    return true;
  }
  return false;
}

// Finds the first delimiter line at or after `from`. A delimiter at `from`
// itself counts only when `from` is 0 (the body opens with it); elsewhere it
// must follow a LF at or after `from`.
bool FindDelimiter(std::string_view body, std::string_view dash_boundary, size_t from,
                   Delimiter* delimiter) {
  if (from == 0 && body.substr(0, dash_boundary.size()) == dash_boundary &&
      FinishDelimiter(body, dash_boundary.size(), delimiter)) {
    delimiter->content_end = 0;
    return true;
  }
  std::string line_start = "\n" + std::string(dash_boundary);
  for (size_t lf = body.find(line_start, from); lf != std::string_view::npos;
       lf = body.find(line_start, lf + 1)) {
    if (FinishDelimiter(body, lf + line_start.size(), delimiter)) {
      delimiter->content_end = (lf > from && body[lf - 1] == '\r') ? lf - 1 : lf;
      return true;
    }
  }
  return false;
}

class PartParser {
 public:
  explicit PartParser(size_t index) : index_(index) {}

  StatusOr<MultipartPart> Parse(std::string_view region);

 private:
  Status Header(std::string_view line);
  Status ContentDisposition(std::string_view value);
  Status ContentType(std::string_view value);
  Status TransferEncoding(std::string_view value);

  Status Error(std::string_view what) const {
    return InvalidArgumentError("multipart part " + std::to_string(index_) + ": " +
                                std::string(what));
  }

  size_t index_;
  MultipartPart part_;
  int dispositions_ = 0;
  int content_types_ = 0;
  int encodings_ = 0;
};

StatusOr<MultipartPart> PartParser::Parse(std::string_view region) {
  size_t pos = 0;
  for (;;) {
    size_t lf = region.find('\n', pos);
    if (lf == std::string_view::npos) return Error("headers are not ended by an empty line");
    std::string_view line = region.substr(pos, lf - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = lf + 1;
    if (line.empty()) break;
    KC_RETURN_IF_ERROR(Header(line));
  }
  if (dispositions_ != 1) return Error("expected exactly one Content-Disposition header");
  if (content_types_ != 1) return Error("expected exactly one Content-Type header");
  part_.body = region.substr(pos);
  return std::move(part_);
}

Status PartParser::Header(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') {
    return Error("folded header lines are not supported");
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0 ||
      TrimWhitespace(line.substr(0, colon)).size() != colon) {
    return Error("malformed header line");
  }
  std::string name = AsciiLower(line.substr(0, colon));
  std::string_view value = TrimWhitespace(line.substr(colon + 1));
  if (name == "content-disposition") return ContentDisposition(value);
  if (name == "content-type") return ContentType(value);
  if (name == "content-transfer-encoding") return TransferEncoding(value);
  return Status::Ok();  // other headers carry nothing we use
}

Status PartParser::ContentDisposition(std::string_view value) {
  if (++dispositions_ > 1) return Error("more than one Content-Disposition header");
  StatusOr<HeaderValue> parsed = ParseHeaderValue(value);
  if (!parsed.ok()) return Error("Content-Disposition: " + parsed.status().message());
  if (parsed->type != "form-data") return Error("Content-Disposition must be form-data");
  std::vector<std::string> names = parsed->Get("name");
  if (names.size() != 1 || names[0].empty()) {
    return Error("Content-Disposition needs exactly one non-empty name parameter");
  }
  part_.name = std::move(names[0]);  // a filename parameter is allowed and ignored
  return Status::Ok();
}

Status PartParser::ContentType(std::string_view value) {
  if (++content_types_ > 1) return Error("more than one Content-Type header");
  if (value.empty()) return Error("empty Content-Type header");
  std::string media_type = AsciiLower(TrimWhitespace(value.substr(0, value.find(';'))));
  if (media_type.rfind("multipart/", 0) == 0) return Error("nested multipart is not supported");
  part_.content_type = std::string(value);
  return Status::Ok();
}

Status PartParser::TransferEncoding(std::string_view value) {
  if (++encodings_ > 1) return Error("more than one Content-Transfer-Encoding header");
  std::string encoding = AsciiLower(value);
  if (encoding != "binary" && encoding != "8bit") {
    return Error("Content-Transfer-Encoding must be binary or 8bit");
  }
  return Status::Ok();
}

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
  if (boundary.empty()) return InvalidArgumentError("empty multipart boundary");
  std::string dash_boundary = "--" + std::string(boundary);
  Delimiter delimiter;
  // Anything before the first delimiter is preamble and ignored.
  if (!FindDelimiter(body, dash_boundary, 0, &delimiter)) {
    return InvalidArgumentError("multipart body has no boundary line");
  }
  std::vector<MultipartPart> parts;
  while (!delimiter.close) {
    size_t start = delimiter.next;
    if (!FindDelimiter(body, dash_boundary, start, &delimiter)) {
      return InvalidArgumentError("multipart body is missing its closing boundary");
    }
    std::string_view region = body.substr(start, delimiter.content_end - start);
    KC_ASSIGN_OR_RETURN(MultipartPart part, PartParser(parts.size()).Parse(region));
    parts.push_back(std::move(part));
  }
  if (parts.empty()) return InvalidArgumentError("multipart body has no parts");
  return parts;
}

}  // namespace kc::protocol
