#include "server/core/request_ending.h"

namespace kc::server {

EndingTraits TraitsOf(RequestEnding ending) {
  // Levels (spec/server.md §6): a client's program failing is never an error;
  // a client's mistake or a refusal is a warning; the server's failure is an error.
  switch (ending) {
    case RequestEnding::kCompleted:
      return {200, "", "completed", EventLevel::kInfo, false};
    case RequestEnding::kProgramFailed:
      return {200, "", "program_failed", EventLevel::kInfo, false};
    case RequestEnding::kCrashedInInstruction:
      // The worker is replaced; worth a look, but the client's code did it.
      return {200, "runtime", "crashed", EventLevel::kWarning, false};
    case RequestEnding::kCacheMiss:
      return {200, "", "cache_miss", EventLevel::kInfo, false};
    case RequestEnding::kRejected:
      return {400, "parse", "rejected", EventLevel::kWarning, false};
    case RequestEnding::kMethodNotAllowed:
      return {405, "parse", "rejected", EventLevel::kWarning, false};
    case RequestEnding::kRequestTooLarge:
      return {413, "request_too_large", "rejected", EventLevel::kWarning, false};
    case RequestEnding::kUnauthorized:
      return {401, "unauthorized", "rejected", EventLevel::kWarning, false};
    case RequestEnding::kTooManyFailures:
      return {429, "unauthorized", "rejected", EventLevel::kWarning, true};
    case RequestEnding::kForbidden:
      return {403, "forbidden", "rejected", EventLevel::kWarning, false};
    case RequestEnding::kQuotaExceeded:  // its Retry-After says when the limit frees
      return {429, "quota", "quota", EventLevel::kWarning, false};
    case RequestEnding::kConflict:
      return {409, "conflict", "rejected", EventLevel::kWarning, false};
    case RequestEnding::kCancelled:
      // 499 is nginx's "client closed request": for the log and metrics only.
      return {499, "cancelled", "cancelled", EventLevel::kWarning, false};
    case RequestEnding::kShuttingDown:
      return {503, "busy", "no_worker", EventLevel::kWarning, true};
    case RequestEnding::kSaturated:
      return {503, "busy", "no_worker", EventLevel::kWarning, true};
    case RequestEnding::kClusterUnavailable:
      return {503, "unavailable", "cluster_unavailable", EventLevel::kWarning, true};
    case RequestEnding::kTimedOut:
      return {504, "timeout", "timeout", EventLevel::kWarning, false};
    case RequestEnding::kCrashed:
      return {500, "engine", "crashed", EventLevel::kError, false};
    case RequestEnding::kInvalidWorkerResponse:
      return {500, "engine", "server_error", EventLevel::kError, false};
    case RequestEnding::kResponseTooLarge:
      return {500, "response_too_large", "server_error", EventLevel::kError, false};
    case RequestEnding::kInternal:
      return {500, "internal", "server_error", EventLevel::kError, false};
  }
  return {500, "internal", "server_error", EventLevel::kError, false};  // not reached
}

RequestEnding EndingForStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return RequestEnding::kRejected;
    case StatusCode::kUnavailable:
      return RequestEnding::kSaturated;
    case StatusCode::kDeadlineExceeded:
      return RequestEnding::kTimedOut;
    case StatusCode::kCancelled:
      return RequestEnding::kCancelled;
    case StatusCode::kPermissionDenied:
      return RequestEnding::kForbidden;
    case StatusCode::kOk:  // a caller's bug: there was no failure to map
    case StatusCode::kResourceExhausted:
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kInternal:
      return RequestEnding::kInternal;
  }
  return RequestEnding::kInternal;  // not reached
}

}  // namespace kc::server
