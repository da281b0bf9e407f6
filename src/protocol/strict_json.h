// Strict JSON parsing for wire input (spec/protocol.md §2.1): UTF-8 only,
// duplicate object keys rejected at any depth, NaN/Infinity literals and
// numbers that overflow to infinity rejected.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::protocol {

// Errors are kInvalidArgument naming the problem ("duplicate key 'id'", ...).
StatusOr<nlohmann::json> ParseStrictJson(std::string_view text);

}  // namespace kc::protocol
