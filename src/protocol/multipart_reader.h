// Strict multipart/form-data reader for POST /execute (spec/protocol.md §1.5).
// Pure: parts are views into the caller's body, which must outlive them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kc::protocol {

struct MultipartPart {
  std::string name;          // Content-Disposition name parameter
  std::string content_type;  // the Content-Type header value, as sent (trimmed)
  std::string_view body;
};

// Extracts the boundary from a `multipart/form-data; boundary=...` header value.
// Anything else is kInvalidArgument.
StatusOr<std::string> MultipartBoundary(std::string_view content_type);

// Splits `body` into parts, enforcing every framing rule of §1.5: exactly one
// Content-Disposition (form-data, one non-empty name) and exactly one
// Content-Type per part, no nested multipart, Content-Transfer-Encoding only
// binary/8bit, CRLF or bare-LF boundary lines, header blocks of at most
// kMaxPartHeaderBlock bytes, at least one part, a closing delimiter. Errors
// are kInvalidArgument. MultipartStream does the same on a body in chunks.
StatusOr<std::vector<MultipartPart>> ReadMultipart(std::string_view body,
                                                   std::string_view boundary);

}  // namespace kc::protocol
