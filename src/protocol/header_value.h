// HeaderValue: a MIME header value of the form `type; name=value; name="quoted"`
// (RFC 2045 §5.1, RFC 7578 §4.2), as used by the request Content-Type and the
// Content-Disposition of each multipart part (spec/protocol.md §1.5).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kc::protocol {

struct HeaderValue {
  std::string type;  // trimmed and lowercased, e.g. "multipart/form-data"
  // In order of appearance; names lowercased, values unquoted. Repeats are
  // kept so callers can refuse them.
  std::vector<std::pair<std::string, std::string>> params;

  // Values of every parameter called `name` (lowercase).
  std::vector<std::string> Get(std::string_view name) const;
};

// Errors are kInvalidArgument ("empty type", "unterminated quoted string", ...).
StatusOr<HeaderValue> ParseHeaderValue(std::string_view value);

// ASCII lowercase copy.
std::string AsciiLower(std::string_view text);

// Without leading and trailing spaces and tabs.
std::string_view TrimWhitespace(std::string_view text);

}  // namespace kc::protocol
