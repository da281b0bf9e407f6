#include "server/outcome_reply.h"

#include <set>

#include "protocol/multipart_writer.h"
#include "protocol/value_codec.h"

namespace kc::server {

namespace {

using nlohmann::ordered_json;

const char* OpName(protocol::Op op) {
  switch (op) {
    case protocol::Op::kUpload:
      return "upload";
    case protocol::Op::kGetFunction:
      return "get_function";
    case protocol::Op::kRun:
      return "run";
    case protocol::Op::kReturn:
      return "return";
  }
  return "run";
}

// The outcome body in the reference's key order (§4.1).
ordered_json OutcomeBody(const std::string& status, const std::string& request_id,
                         const pool::JobResult& result, ordered_json results) {
  ordered_json body;
  body["status"] = status;
  body["request_id"] = request_id;
  body["queue_ms"] = result.queue_ms;
  body["elapsed_ms"] = result.elapsed_ms;
  body["lease_wait_ms"] = result.run.lease_wait_ms;
  body["lease_held_ms"] = result.run.lease_held_ms;
  body["stdout"] = result.run.out.head;
  body["stderr"] = result.run.err.head;
  body["stdout_truncated"] = result.run.out.truncated;
  body["stderr_truncated"] = result.run.err.truncated;
  body["results"] = std::move(results);
  return body;
}

// A worker that died inside instruction i: 200 FAILED runtime (§10).
HttpReply CrashedInInstruction(const OutcomeContext& context, const pool::JobResult& result) {
  const auto& instruction = context.program->instructions.at(result.run.instruction_index);
  ordered_json body = OutcomeBody("FAILED", context.request_id, result, ordered_json::object());
  body["error"] = {
      {"kind", "runtime"},
      {"message", "worker exited while executing the instruction (" + result.run.message + ")"},
      {"instruction_index", result.run.instruction_index},
      {"instruction_op", OpName(instruction.op)},
      {"instruction_id", instruction.op == protocol::Op::kReturn ? ordered_json(nullptr)
                                                                 : ordered_json(instruction.id)},
      {"traceback", ""}};
  HttpReply reply{200, "application/json", DumpJson(body), context.request_id};
  reply.finish_reason = "crashed";
  reply.error_kind = "runtime";
  return reply;
}

// Checks the shape of the worker's `error` object; the worker is untrusted.
bool ValidError(const ordered_json& error, size_t instruction_count) {
  if (!error.is_object() || !error.contains("kind") || !error["kind"].is_string()) return false;
  if (!error.contains("message") || !error["message"].is_string()) return false;
  if (!error.contains("instruction_index") || !error["instruction_index"].is_number_integer())
    return false;
  int64_t index = error["instruction_index"].get<int64_t>();
  if (index < 0 || static_cast<size_t>(index) >= instruction_count) return false;
  static const std::set<std::string> kKinds = {"parse",       "compile",     "runtime",
                                               "gpu_access",  "correctness", "serialization",
                                               "unavailable", "engine"};
  if (!kKinds.count(error["kind"].get<std::string>())) return false;
  size_t expected = error["kind"] == "gpu_access" ? 9 : 6;
  return error.size() == expected && error.contains("traceback") &&
         error["traceback"].is_string() && error.contains("instruction_op") &&
         error.contains("instruction_id");
}

HttpReply FromOutcome(const OutcomeContext& context, pool::JobResult& result) {
  auto engine_error = [&](const std::string& message) {
    HttpReply reply =
        ErrorReply(500, "engine", "invalid worker response: " + message, context.request_id);
    reply.finish_reason = "server_error";
    return reply;
  };
  ordered_json outcome = ordered_json::parse(result.run.outcome_json, nullptr, false);
  if (!outcome.is_object() || !outcome.contains("results") || !outcome["results"].is_object() ||
      !outcome.contains("segments") || !outcome["segments"].is_array()) {
    return engine_error("malformed outcome");
  }
  const std::string status = outcome.value("status", "");
  if (status != "COMPLETED" && status != "FAILED") return engine_error("bad status");
  if ((status == "FAILED") != outcome.contains("error"))
    return engine_error("status and error disagree");
  if (status == "FAILED" && !ValidError(outcome["error"], context.program->instructions.size())) {
    return engine_error("malformed error object");
  }

  // Cut the parts buffer into the segments the worker declared.
  std::vector<std::string_view> segments;
  size_t offset = 0;
  for (const auto& length : outcome["segments"]) {
    if (!length.is_number_unsigned() || length.get<uint64_t>() > result.run.parts.size() - offset) {
      return engine_error("segment lengths exceed the data sent");
    }
    segments.emplace_back(result.run.parts.data() + offset, length.get<size_t>());
    offset += length.get<size_t>();
  }
  if (offset != result.run.parts.size()) return engine_error("unused result data");
  ordered_json results = std::move(outcome["results"]);
  if (Status s = protocol::FinalizeResults(results, segments); !s.ok())
    return engine_error(s.message());

  ordered_json body = OutcomeBody(status, context.request_id, result, std::move(results));
  HttpReply reply{200, "application/json", "", context.request_id};
  if (status == "FAILED") {
    body["error"] = std::move(outcome["error"]);
    if (body["error"]["kind"] == "gpu_access") {
      // Who held the GPU when the cpu_only call touched it: known only here.
      body["error"]["interfered_request_id"] = result.interfered_request_id
                                                   ? ordered_json(*result.interfered_request_id)
                                                   : ordered_json(nullptr);
    }
    reply.finish_reason = "program_failed";
    reply.error_kind = body["error"]["kind"];
    reply.error_message = body["error"]["message"];
  } else {
    reply.finish_reason = "completed";
  }
  const bool binary = protocol::HasBinaryParts(body["results"]);
  std::string json = DumpJson(body);
  if (!binary) {
    reply.body = std::move(json);
  } else {
    std::vector<protocol::OutgoingPart> parts = {{"result", "application/json", json}};
    for (size_t k = 0; k < segments.size(); ++k) {
      parts.push_back({"return:" + std::to_string(k), "application/octet-stream", segments[k]});
    }
    auto encoded = protocol::WriteMultipart(parts);
    reply.content_type = std::move(encoded.content_type);
    reply.body = std::move(encoded.body);
  }
  if (reply.body.size() > context.max_response_bytes) {
    HttpReply too_large = ErrorReply(500, "response_too_large",
                                     "the response is " + std::to_string(reply.body.size()) +
                                         " bytes, over max_response_bytes " +
                                         std::to_string(context.max_response_bytes),
                                     context.request_id);
    too_large.finish_reason = "server_error";
    return too_large;
  }
  return reply;
}

}  // namespace

HttpReply BuildOutcomeReply(const OutcomeContext& context, pool::JobResult& result) {
  if (result.cancelled) {
    // Nobody reads it; 499 (nginx's "client closed request") is for the log and metrics.
    HttpReply reply = ErrorReply(499, "cancelled",
                                 "the client closed the connection; the "
                                 "program was cancelled",
                                 context.request_id);
    reply.finish_reason = "cancelled";
    return reply;
  }
  if (!result.ran) {
    HttpReply reply = ErrorReply(503, "busy", "server saturated", context.request_id);
    reply.finish_reason = "no_worker";
    return reply;
  }
  if (context.output_limit_bytes == 0) {
    result.run.out = {};
    result.run.err = {};
  }
  switch (result.run.ending) {
    case pool::RunResult::Ending::kTimedOut: {
      HttpReply reply = ErrorReply(504, "timeout", "execution timed out", context.request_id);
      reply.finish_reason = "timeout";
      return reply;
    }
    case pool::RunResult::Ending::kCrashed:
      if (result.run.instruction_index >= 0 && static_cast<size_t>(result.run.instruction_index) <
                                                   context.program->instructions.size()) {
        return CrashedInInstruction(context, result);
      } else {
        HttpReply reply = ErrorReply(500, "engine", "worker crashed (" + result.run.message + ")",
                                     context.request_id);
        reply.finish_reason = "crashed";
        return reply;
      }
    case pool::RunResult::Ending::kBroken: {
      HttpReply reply = ErrorReply(500, "engine", "invalid worker response: " + result.run.message,
                                   context.request_id);
      reply.finish_reason = "server_error";
      return reply;
    }
    case pool::RunResult::Ending::kOutcome:
      return FromOutcome(context, result);
    case pool::RunResult::Ending::kCancelled:
      break;  // answered above
  }
  return ErrorReply(500, "engine", "unreachable", context.request_id);
}

}  // namespace kc::server
