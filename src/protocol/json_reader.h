// Strict JSON reading into JsonValue (json_value.h), for everything the server
// reads off the wire or from a worker (spec/protocol.md §2.1, §4).
//
// Accepted: RFC 8259 JSON in UTF-8, plus what Python's json module (the
// reference) also reads and writes: lone surrogate escapes ("\ud800", kept as
// WTF-8) and integers of any length up to Python's conversion limit.
// Refused, as kInvalidArgument naming the problem and where it is: invalid
// UTF-8, a byte order mark, duplicate object keys at any depth, NaN/Infinity
// literals, numbers that overflow to infinity, nesting past max_depth,
// comments, trailing commas and anything after the document.
//
// Linear in the input: objects are built once from a member stack and their
// keys are checked with a hash set, never with a scan per insertion.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"
#include "protocol/json_value.h"

namespace kc::protocol {

struct JsonReadOptions {
  // The reference's parser stops near Python's recursion limit (~1000).
  size_t max_depth = 1000;
  // Python refuses to turn a longer digit string into an int
  // (sys.int_info.default_max_str_digits), so the reference cannot read one.
  size_t max_integer_digits = 4300;
};

// Errors read "invalid JSON: <what> at line L, column C".
StatusOr<JsonValue> ReadJson(std::string_view text, const JsonReadOptions& options = {});

}  // namespace kc::protocol
