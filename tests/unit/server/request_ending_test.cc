#include "server/core/request_ending.h"

#include <string>

#include <gtest/gtest.h>

#include "protocol/json_reader.h"
#include "server/core/http_reply.h"

namespace kc::server {
namespace {

constexpr RequestEnding kAllEndings[] = {
    RequestEnding::kCompleted,
    RequestEnding::kProgramFailed,
    RequestEnding::kCrashedInInstruction,
    RequestEnding::kCacheMiss,
    RequestEnding::kRejected,
    RequestEnding::kMethodNotAllowed,
    RequestEnding::kRequestTooLarge,
    RequestEnding::kCancelled,
    RequestEnding::kShuttingDown,
    RequestEnding::kSaturated,
    RequestEnding::kClusterUnavailable,
    RequestEnding::kTimedOut,
    RequestEnding::kCrashed,
    RequestEnding::kInvalidWorkerResponse,
    RequestEnding::kResponseTooLarge,
    RequestEnding::kInternal,
};

struct Row {
  RequestEnding ending;
  int http_status;
  const char* kind;
  const char* finish_reason;
  EventLevel level;
};

// The wire half is pinned by the reference (spec/protocol.md §1.6, §13.7);
// finish reasons and levels by spec/server.md §2.8 and §6.
TEST(RequestEnding, TableMatchesTheSpec) {
  const Row rows[] = {
      {RequestEnding::kCompleted, 200, "", "completed", EventLevel::kInfo},
      {RequestEnding::kProgramFailed, 200, "", "program_failed", EventLevel::kInfo},
      {RequestEnding::kCrashedInInstruction, 200, "runtime", "crashed", EventLevel::kWarning},
      {RequestEnding::kCacheMiss, 200, "", "cache_miss", EventLevel::kInfo},
      {RequestEnding::kRejected, 400, "parse", "rejected", EventLevel::kWarning},
      {RequestEnding::kMethodNotAllowed, 405, "parse", "rejected", EventLevel::kWarning},
      {RequestEnding::kRequestTooLarge, 413, "request_too_large", "rejected", EventLevel::kWarning},
      {RequestEnding::kCancelled, 499, "cancelled", "cancelled", EventLevel::kWarning},
      {RequestEnding::kShuttingDown, 503, "busy", "no_worker", EventLevel::kWarning},
      {RequestEnding::kSaturated, 503, "busy", "no_worker", EventLevel::kWarning},
      {RequestEnding::kClusterUnavailable, 503, "unavailable", "cluster_unavailable",
       EventLevel::kWarning},
      {RequestEnding::kTimedOut, 504, "timeout", "timeout", EventLevel::kWarning},
      {RequestEnding::kCrashed, 500, "engine", "crashed", EventLevel::kError},
      {RequestEnding::kInvalidWorkerResponse, 500, "engine", "server_error", EventLevel::kError},
      {RequestEnding::kResponseTooLarge, 500, "response_too_large", "server_error",
       EventLevel::kError},
      {RequestEnding::kInternal, 500, "internal", "server_error", EventLevel::kError},
  };
  ASSERT_EQ(std::size(rows), std::size(kAllEndings));
  for (const Row& row : rows) {
    SCOPED_TRACE(row.finish_reason);
    EndingTraits traits = TraitsOf(row.ending);
    EXPECT_EQ(traits.http_status, row.http_status);
    EXPECT_EQ(traits.error_kind, row.kind);
    EXPECT_EQ(traits.finish_reason, row.finish_reason);
    EXPECT_EQ(traits.level, row.level);
    EXPECT_EQ(traits.retry_after, row.http_status == 503);
  }
}

TEST(RequestEnding, OnlyServerFailuresAreErrors) {
  for (RequestEnding ending : kAllEndings) {
    EndingTraits traits = TraitsOf(ending);
    EXPECT_EQ(traits.level == EventLevel::kError, traits.http_status == 500)
        << traits.finish_reason;
  }
}

TEST(RequestEnding, InvalidArgumentIsTheClientsParseError) {
  EXPECT_EQ(EndingForStatus(InvalidArgumentError("instructions[0].op: bad")),
            RequestEnding::kRejected);
}

// Regression: every Resolve failure was a 400 parse, even a memfd that could
// not be created (the server's failure, not the request's).
TEST(RequestEnding, InternalFailureIsA500NotA400) {
  RequestEnding ending = EndingForStatus(InternalError("memfd_create: Too many open files"));
  EXPECT_EQ(ending, RequestEnding::kInternal);
  EXPECT_EQ(TraitsOf(ending).http_status, 500);
  EXPECT_EQ(TraitsOf(ending).error_kind, "internal");
}

TEST(RequestEnding, RetryAndDeadlineCodesKeepTheirMeaning) {
  EXPECT_EQ(EndingForStatus(UnavailableError("x")), RequestEnding::kSaturated);
  EXPECT_EQ(EndingForStatus(DeadlineExceededError("x")), RequestEnding::kTimedOut);
  EXPECT_EQ(EndingForStatus(Status(StatusCode::kCancelled, "x")), RequestEnding::kCancelled);
  for (StatusCode code :
       {StatusCode::kResourceExhausted, StatusCode::kNotFound, StatusCode::kFailedPrecondition}) {
    EXPECT_EQ(EndingForStatus(Status(code, "x")), RequestEnding::kInternal);
  }
}

TEST(EndingReply, ErrorBodyHasExactlyKindAndMessage) {
  HttpReply reply = EndingReply(RequestEnding::kSaturated, "server saturated", "rid");
  EXPECT_EQ(reply.status, 503);
  EXPECT_TRUE(reply.retry_after);
  EXPECT_EQ(reply.request_id, "rid");
  EXPECT_EQ(reply.finish_reason(), "no_worker");
  EXPECT_EQ(reply.error_kind, "busy");
  EXPECT_EQ(reply.body, R"({"status":"ERROR","request_id":"rid","error":{"kind":"busy",)"
                        R"("message":"server saturated"}})");
}

TEST(EndingReply, MessageTextIsEscapedValidJson) {
  HttpReply reply = EndingReply(RequestEnding::kRejected, "bad \"key\" \xED\xA0\x80 \xFF", "r");
  EXPECT_EQ(reply.status, 400);
  EXPECT_FALSE(reply.retry_after);
  StatusOr<protocol::JsonValue> body = protocol::ReadJson(reply.body);
  ASSERT_TRUE(body.ok()) << body.status().message();
}

TEST(BodyReply, TakesStatusFromTheEnding) {
  HttpReply reply = BodyReply(RequestEnding::kCacheMiss, "application/json", "{}", "r");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.finish_reason(), "cache_miss");
  EXPECT_EQ(reply.body, "{}");
}

}  // namespace
}  // namespace kc::server
