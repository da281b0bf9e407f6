// How failures become HTTP (spec/protocol.md §1.6). The one table from a
// Status code to an HTTP status and error kind; it has no `default:`, so a
// new code makes -Wswitch point here.
#pragma once

#include <string>

#include "base/status.h"

namespace kc::server {

struct HttpError {
  int http_status;
  const char* kind;
  bool retry_after;  // 503: Retry-After: 1
};

inline HttpError ToHttpError(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return {400, "parse", false};
    case StatusCode::kResourceExhausted:
      return {413, "request_too_large", false};
    case StatusCode::kUnavailable:
      return {503, "busy", true};
    case StatusCode::kDeadlineExceeded:
      return {504, "timeout", false};
    case StatusCode::kCancelled:
      return {503, "busy", true};
    case StatusCode::kNotFound:
      return {400, "parse", false};
    case StatusCode::kFailedPrecondition:
      return {400, "parse", false};
    case StatusCode::kInternal:
      return {500, "engine", false};
    case StatusCode::kOk:
      return {200, "", false};
  }
  return {500, "engine", false};
}

}  // namespace kc::server
