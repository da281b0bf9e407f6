#include "server/transport/access_gate.h"

#include "server/core/server_config.h"
#include "server/status/event_log.h"
#include "server/status/request_accounting.h"

namespace kc::server {

Admission AdmitCaller(Services& services, Access needed, std::string_view authorization,
                      std::string_view client) {
  AccessDecision decision = services.access.Check(needed, authorization, client);
  if (decision.status == 200) return {std::move(decision.caller), std::nullopt};
  const RequestEnding ending = decision.status == 401   ? RequestEnding::kUnauthorized
                               : decision.status == 403 ? RequestEnding::kForbidden
                                                        : RequestEnding::kTooManyFailures;
  services.events.Emit(
      EventLevel::kWarning, "access_refused",
      {{"client", client}, {"http_status", decision.status}, {"reason", decision.message}});
  HttpReply reply = EndingReply(ending, decision.message, "");
  CountFinished(services, reply, 0, nullptr);
  return {std::nullopt, std::move(reply)};
}

HttpReply RequestTooLarge(Services& services, const std::string& request_id, uint64_t declared) {
  HttpReply reply = EndingReply(RequestEnding::kRequestTooLarge,
                                "request body of " + std::to_string(declared) +
                                    " bytes exceeds max_request_bytes " +
                                    std::to_string(services.config.max_request_bytes),
                                request_id);
  CountFinished(services, reply, 0, nullptr);  // never reaches the /execute route
  return reply;
}

}  // namespace kc::server
