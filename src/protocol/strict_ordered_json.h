// Strict JSON parsing into nlohmann::ordered_json, for input whose key order
// matters (the worker's outcome: `results` keys must keep execution order,
// spec/protocol.md §4.3). Same rules as ParseStrictJson in strict_json.h.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::protocol {

// Errors are kInvalidArgument naming the problem.
StatusOr<nlohmann::ordered_json> ParseStrictOrderedJson(std::string_view text);

}  // namespace kc::protocol
