// Turns what the pool reports for a request into the HTTP answer
// (spec/protocol.md §1.6, §4): outcome bodies with exact key order, binary
// parts numbered and hashed (protocol/value_codec.h), multipart framing,
// timeouts, crashes and the response size cap.
//
// The worker runs untrusted code, so its outcome is read strictly and in
// time linear in its size (protocol/json_reader.h), and one bigger than
// max_response_bytes is answered response_too_large without being parsed.
// Sealed benchmark results are verified on the way (result_verification.h).
#pragma once

#include "pool/worker_pool.h"
#include "protocol/program.h"
#include "server/core/http_reply.h"

namespace kc::server {

struct OutcomeContext {
  std::string request_id;
  const protocol::Program* program;
  uint64_t max_response_bytes;
  int64_t output_limit_bytes;
};

HttpReply BuildOutcomeReply(const OutcomeContext& context, pool::JobResult& result);

}  // namespace kc::server
