// HttpReply: what a route answers, before it becomes a Beast response.
// Routes never touch the socket (STYLE.md §6). /execute replies are built
// from a RequestEnding (request_ending.h), which fixes their HTTP status,
// error kind and Retry-After.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "protocol/multipart_writer.h"
#include "server/core/request_ending.h"

namespace kc::server {

// A body written as pieces, never joined: the views of `encoded` point into
// `result_json` and into memory that `keep` holds (the worker's mapped
// result memfd, or a mapped blob sent to another node).
struct PiecesBody {
  std::string result_json;
  std::shared_ptr<const void> keep;
  protocol::EncodedMultipart encoded;
};

// A body of one piece: a mapping of `sealed_memfd` (a blob), written as it is, never copied
// into the reply (base/shared_bytes.h).
StatusOr<std::shared_ptr<PiecesBody>> MappedBody(int sealed_memfd);

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;                    // unless `pieces` is set
  std::string request_id;              // X-Request-ID; empty for /health
  std::shared_ptr<PiecesBody> pieces;  // a body of pieces, instead of `body`
  bool retry_after = false;
  std::optional<double> server_ms;  // Server-Timing: from the request's header to its reply
  std::vector<std::pair<std::string, std::string>> headers;  // any others
  // How an /execute request ended; empty for other routes.
  std::optional<RequestEnding> ending;
  // For the event log (spec/server.md §6).
  std::string error_kind;
  std::string error_message;
  // The verdict on its sealed benchmark results (result_verification.h SealTally), for the
  // dashboard; empty when it returned none.
  std::string integrity;

  size_t body_size() const { return pieces ? pieces->encoded.size() : body.size(); }

  // spec/server.md §6 finish_reason; empty outside /execute.
  std::string_view finish_reason() const {
    return ending ? TraitsOf(*ending).finish_reason : std::string_view();
  }
};

// For bodies that hold only server-made text (/health, CACHE_MISS).
inline std::string DumpJson(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The body of a request that ended without an outcome:
// {"status":"ERROR","request_id":...,"error":{"kind":...,"message":...}},
// with the ending's HTTP status, kind and Retry-After (§1.6).
HttpReply EndingReply(RequestEnding ending, std::string_view message,
                      const std::string& request_id);

// A reply with a body of its own (outcome, CACHE_MISS) for an ending whose
// HTTP status is 200.
HttpReply BodyReply(RequestEnding ending, std::string content_type, std::string body,
                    const std::string& request_id);

}  // namespace kc::server
