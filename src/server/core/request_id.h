// Request ids (spec/protocol.md §1.5): a client-supplied X-Request-ID is used
// only if it is exactly one canonical lowercase hyphenated UUID; otherwise a
// fresh random (version 4) UUID is generated.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kc::server {

bool IsCanonicalUuid(std::string_view text);
std::string NewUuid();
std::string ChooseRequestId(const std::vector<std::string_view>& supplied);

}  // namespace kc::server
