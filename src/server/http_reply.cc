#include "server/http_reply.h"

namespace kc::server {

HttpReply ErrorReply(int status, std::string_view kind, std::string_view message,
                     const std::string& request_id) {
  nlohmann::ordered_json body = {{"status", "ERROR"},
                                 {"request_id", request_id},
                                 {"error", {{"kind", kind}, {"message", message}}}};
  HttpReply reply{status, "application/json", DumpJson(body), request_id};
  reply.retry_after = status == 503;
  reply.error_kind = kind;
  reply.error_message = message;
  return reply;
}

}  // namespace kc::server
