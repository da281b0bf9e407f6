// Strict JSON parsing for wire input (spec/protocol.md §2.1) into
// nlohmann::json, for the program validator. The rules are json_reader.h's:
// UTF-8 only, duplicate object keys rejected at any depth, NaN/Infinity and
// numbers that overflow to infinity rejected; lone surrogate escapes and long
// integers accepted, as Python's json (the reference) accepts them.
//
// nlohmann cannot hold what it cannot parse: a lone surrogate becomes WTF-8
// bytes in the std::string, and an integer beyond 64 bits its nearest double
// (possibly infinite). The program text itself, not this value, is what the
// worker receives, so those digits still reach the program unchanged.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::protocol {

// Errors are kInvalidArgument naming the problem ("duplicate key 'id'", ...).
StatusOr<nlohmann::json> ParseStrictJson(std::string_view text);

}  // namespace kc::protocol
