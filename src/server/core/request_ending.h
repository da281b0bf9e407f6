// RequestEnding: every way a POST /execute can end, and the one table that
// says what each means on the wire (HTTP status, error kind, Retry-After), in
// the event log (finish_reason, level) and in /metrics (spec/protocol.md §1.6,
// §10; spec/server.md §2.8, §6). Reply builders (http_reply.h) take an ending,
// never a status code or kind of their own.
//
// The switch in TraitsOf has no default, so a new ending makes -Wswitch point
// at the row it needs.
#pragma once

#include <string_view>

#include "base/status.h"
#include "pool/event_sink.h"

namespace kc::server {

enum class RequestEnding {
  kCompleted,              // 200 COMPLETED
  kProgramFailed,          // 200 FAILED: an instruction failed (its kind is the error kind)
  kCrashedInInstruction,   // 200 FAILED runtime: the worker died inside an instruction
  kCacheMiss,              // 200 CACHE_MISS: blobs to send
  kRejected,               // 400 parse: malformed request or program
  kMethodNotAllowed,       // 405 parse: GET /execute and the like
  kRequestTooLarge,        // 413 request_too_large
  kUnauthorized,           // 401 unauthorized: no API key, or one that is not valid
  kTooManyFailures,        // 429 unauthorized: too many failed key checks from one address
  kForbidden,              // 403 forbidden: a route the key's role may not use
  kConflict,               // 409 conflict: an Idempotency-Key already bound to another program
  kQuotaExceeded,          // 429 quota: a tenant's limit that frees later (Retry-After: when)
  kCancelled,              // 499 cancelled: the client hung up (nobody reads the reply)
  kShuttingDown,           // 503 busy: the server is draining
  kSaturated,              // 503 busy: no seat in time, or the queue is full
  kClusterUnavailable,     // 503 unavailable: the cluster's NATS servers do not answer (no quorum)
  kTimedOut,               // 504 timeout: the execution budget ran out
  kCrashed,                // 500 engine: the worker died outside any instruction
  kInvalidWorkerResponse,  // 500 engine: the worker sent what it must not
  kResponseTooLarge,       // 500 response_too_large: over max_response_bytes
  kInternal,               // 500 internal: the server's own failure (memfd, disk, a bug)
};

struct EndingTraits {
  int http_status;
  // The body's error.kind for non-200 endings; for 200 ones, the event log's
  // error_kind (empty: none, or the failed instruction's own kind).
  std::string_view error_kind;
  std::string_view finish_reason;
  EventLevel level;
  bool retry_after;  // 503s carry Retry-After: 1 (§1.6)
};

EndingTraits TraitsOf(RequestEnding ending);

// How a request ends when parsing, validating or resolving it failed with
// `status` (not OK): kInvalidArgument is the client's (400 parse), a code
// that asks for a retry or means a deadline keeps that meaning, and anything
// else is the server's own failure (500 internal), never the client's 400.
RequestEnding EndingForStatus(const Status& status);

}  // namespace kc::server
