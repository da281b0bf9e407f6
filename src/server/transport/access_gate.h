// The door every route passes before its body is read: the keys check (access_control.h), and
// a body larger than the server takes. A refusal here is counted and logged like any reply.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/core/http_reply.h"
#include "server/core/services.h"
#include "server/tenancy/access_control.h"

namespace kc::server {

// Who calls (nobody without keys), or the 401/403/429 to answer.
struct Admission {
  std::optional<Caller> caller;
  std::optional<HttpReply> refusal;
};
Admission AdmitCaller(Services& services, Access needed, std::string_view authorization,
                      std::string_view client);

// The 413 for a body of `declared` bytes over --max-request-bytes.
HttpReply RequestTooLarge(Services& services, const std::string& request_id, uint64_t declared);

}  // namespace kc::server
