// HttpReply: what a route answers, before it becomes a Beast response.
// Routes never touch the socket (STYLE.md §6).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kc::server {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string request_id;  // X-Request-ID; empty for /health
  bool retry_after = false;
  // For the event log: why it ended (spec/server.md §6 finish_reason).
  std::string finish_reason;
  std::string error_kind;
  std::string error_message;
};

inline std::string DumpJson(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// {"status":"ERROR","request_id":...,"error":{"kind":...,"message":...}}
HttpReply ErrorReply(int status, std::string_view kind, std::string_view message,
                     const std::string& request_id);

}  // namespace kc::server
