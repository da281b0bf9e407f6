#include "server/execute/outcome_reply.h"

#include <algorithm>
#include <set>
#include <utility>

#include "protocol/json_reader.h"
#include "protocol/json_writer.h"
#include "protocol/multipart_writer.h"
#include "protocol/utf8.h"
#include "protocol/value_codec.h"
#include "server/execute/result_verification.h"

namespace kc::server {

namespace {

using protocol::JsonValue;
using protocol::JsonWriter;

// What the server saw around the request's timing spans, for every verified benchmark record
// (docs/benchmark-integrity.md "Flags and conditions"). A request's spans are one account:
// a finding of any span is reported on each of its benchmarks. All are conditions: house-keeping
// and processes outside the server are the machine's doing, never the candidate's, and a
// context another process merely holds runs nothing (two servers on one GPU saw each other's
// idle stand-bys and untrusted every honest kernel).
std::vector<std::string> SpanConditions(const pool::RunResult& run) {
  std::vector<std::string> conditions;
  if (run.housekeeping_beside_spans > 0) {
    conditions.push_back("gpu: this server's own house-keeping ran beside the timing spans (" +
                         std::to_string(run.housekeeping_beside_spans) +
                         " stand-by or retired workers' CUDA contexts created or destroyed; "
                         "timing_spans.housekeeping_beside)");
  }
  for (const auto& holder : run.foreign_gpu_holders) {
    conditions.push_back(
        "gpu: a process outside this server held a CUDA context on the GPU during a timing span: "
        "pid " +
        std::to_string(holder.pid) + " (" + holder.name +
        "); the timings are honest only if it ran nothing (timing_spans.foreign_processes)");
  }
  if (!run.census_unavailable.empty()) conditions.push_back("gpu: " + run.census_unavailable);
  return conditions;
}

// Writes the outcome body's members up to `results`, in the reference's key
// order (§4.1); the caller writes results, [error] and closes the object.
// Output is bytes from the pipes: decoded as UTF-8 with replacement (§4.5).
void BeginOutcomeBody(JsonWriter& writer, std::string_view status, const std::string& request_id,
                      const pool::JobResult& result) {
  writer.BeginObject()
      .Key("status")
      .String(status)
      .Key("request_id")
      .String(request_id)
      .Key("queue_ms")
      .Double(result.queue_ms)
      .Key("elapsed_ms")
      .Double(result.elapsed_ms)
      .Key("lease_wait_ms")
      .Double(result.run.lease_wait_ms)
      .Key("lease_held_ms")
      .Double(result.run.lease_held_ms)
      .Key("stdout")
      .String(protocol::ToValidUtf8(result.run.out.head))
      .Key("stderr")
      .String(protocol::ToValidUtf8(result.run.err.head))
      .Key("stdout_truncated")
      .Bool(result.run.out.truncated)
      .Key("stderr_truncated")
      .Bool(result.run.err.truncated);
  if (result.run.spans > 0) {  // benchmarks timed on a GPU (docs/gpu-scheduling.md)
    writer.Key("timing_spans")
        .BeginObject()
        .Key("count")
        .Int(result.run.spans)
        .Key("held_ms")
        .Double(result.run.span_held_ms)
        .Key("waited_ms")
        .Double(result.run.span_wait_ms)
        .Key("housekeeping_beside")
        .Int(static_cast<int64_t>(result.run.housekeeping_beside_spans))
        .Key("foreign_processes")
        .BeginArray();
    for (const auto& holder : result.run.foreign_gpu_holders)
      writer.BeginObject()
          .Key("pid")
          .Int(holder.pid)
          .Key("name")
          .String(protocol::ToValidUtf8(holder.name))
          .EndObject();
    writer.EndArray().EndObject();
  }
  if (!result.gpu_ids.empty()) {  // only for options.gpu_count, and always together
    writer.Key("gpu_ids").BeginArray();
    for (int id : result.gpu_ids)
      writer.Int(id);
    writer.EndArray().Key("gpu_count").Int(static_cast<int64_t>(result.gpu_ids.size()));
  }
}

// A worker the server saw fail inside instruction i, with no outcome of its own: 200 FAILED
// with `kind` (§10). It died there (runtime), or was killed for using the GPU off its lease
// (gpu_access).
HttpReply FailedInInstruction(const OutcomeContext& context, const pool::JobResult& result,
                              RequestEnding ending, const std::string& kind,
                              const std::string& message) {
  const auto& instruction = context.program->instructions.at(result.run.instruction_index);
  std::string body;
  JsonWriter writer(body);
  BeginOutcomeBody(writer, "FAILED", context.request_id, result);
  writer.Key("results").BeginObject().EndObject();
  writer.Key("error")
      .BeginObject()
      .Key("kind")
      .String(kind)
      .Key("message")
      .String(message)
      .Key("instruction_index")
      .Int(result.run.instruction_index)
      .Key("instruction_op")
      .String(protocol::OpName(instruction.op));
  writer.Key("instruction_id");
  if (instruction.op == protocol::Op::kReturn) {
    writer.Null();
  } else {
    writer.String(instruction.id);
  }
  writer.Key("traceback").String("");
  if (kind == "gpu_access") {  // its fields (spec/protocol.md §4.4): what NVML saw, and where
    writer.Key("cuda_call")
        .String("(GPU kernels off the lease, seen in NVML's per-process samples)")
        .Key("location")
        .String("process " + std::to_string(result.run.off_lease_pid) +
                " of the worker's process tree")
        .Key("interfered_request_id")
        .Null();
  }
  writer.EndObject().EndObject();
  HttpReply reply = BodyReply(ending, "application/json", std::move(body), context.request_id);
  reply.error_kind = kind;
  reply.error_message = message;
  return reply;
}

bool InInstruction(const OutcomeContext& context, const pool::JobResult& result) {
  return result.run.instruction_index >= 0 &&
         static_cast<size_t>(result.run.instruction_index) < context.program->instructions.size();
}

// Checks the shape of the worker's `error` object; the worker is untrusted.
bool ValidError(const JsonValue& error, size_t instruction_count) {
  if (!error.is_object()) return false;
  const JsonValue* kind = error.Find("kind");
  const JsonValue* message = error.Find("message");
  const JsonValue* index = error.Find("instruction_index");
  const JsonValue* traceback = error.Find("traceback");
  if (!kind || !kind->is_string() || !message || !message->is_string()) return false;
  if (!index || !traceback || !traceback->is_string()) return false;
  std::optional<uint64_t> position = index->AsUint64();
  if (!position || *position >= instruction_count) return false;
  static const std::set<std::string> kKinds = {"parse",       "compile",     "runtime",
                                               "gpu_access",  "correctness", "serialization",
                                               "unavailable", "engine"};
  if (!kKinds.count(kind->string())) return false;
  if (!error.Find("instruction_op") || !error.Find("instruction_id")) return false;
  if (kind->string() != "gpu_access") return error.size() == 6;
  return error.size() == 9 && error.Find("cuda_call") && error.Find("location") &&
         error.Find("interfered_request_id");
}

// The worker's outcome, checked (the worker is untrusted): its status and error agree, and its
// results' binary segments, cut out of the parts buffer, are all there and all used.
struct CheckedOutcome {
  JsonValue outcome;
  bool failed = false;
  std::vector<std::string_view> segments;
};

// Why an outcome is not valid comes back as the message of an invalid_worker_response.
StatusOr<CheckedOutcome> CheckOutcome(const OutcomeContext& context,
                                      const pool::JobResult& result) {
  StatusOr<JsonValue> parsed = protocol::ReadJson(
      result.run.outcome_json, protocol::JsonReadOptions{.max_depth = protocol::kMaxOutcomeDepth});
  if (!parsed.ok()) return InternalError("malformed outcome (" + parsed.status().message() + ")");
  CheckedOutcome checked{std::move(*parsed)};
  JsonValue* results = checked.outcome.Find("results");
  const JsonValue* segment_lengths = checked.outcome.Find("segments");
  const JsonValue* status_field = checked.outcome.Find("status");
  const JsonValue* error = checked.outcome.Find("error");
  if (!results || !results->is_object() || !segment_lengths || !segment_lengths->is_array()) {
    return InternalError("malformed outcome");
  }
  if (!status_field || !(status_field->IsString("COMPLETED") || status_field->IsString("FAILED"))) {
    return InternalError("bad status");
  }
  checked.failed = status_field->IsString("FAILED");
  if (checked.failed != (error != nullptr)) return InternalError("status and error disagree");
  if (checked.failed && !ValidError(*error, context.program->instructions.size())) {
    return InternalError("malformed error object");
  }
  // Cut the parts buffer into the segments the worker declared.
  const std::string_view data = result.run.parts.view();
  size_t offset = 0;
  for (const JsonValue& length_field : segment_lengths->array()) {
    std::optional<uint64_t> length = length_field.AsUint64();
    if (!length || *length > data.size() - offset) {
      return InternalError("segment lengths exceed the data sent");
    }
    checked.segments.push_back(data.substr(offset, *length));
    offset += *length;
  }
  if (offset != data.size()) return InternalError("unused result data");
  if (Status s = protocol::FinalizeResults(*results, checked.segments); !s.ok()) {
    return InternalError(s.message());
  }
  return checked;
}

// The body's JSON: the reference's keys, the results, and the error with what only the server
// knows (who held the GPU when a cpu_only call touched it).
std::string WriteOutcomeBody(const OutcomeContext& context, const pool::JobResult& result,
                             CheckedOutcome& checked) {
  std::string json;
  json.reserve(result.run.outcome_json.size() + 1024);
  JsonWriter writer(json);
  BeginOutcomeBody(writer, checked.outcome.Find("status")->string(), context.request_id, result);
  writer.Key("results").Value(*checked.outcome.Find("results"));
  if (JsonValue* error = checked.outcome.Find("error")) {
    if (error->Find("kind")->string() == "gpu_access") {
      *error->Find("interfered_request_id") = result.interfered_request_id
                                                  ? JsonValue::String(*result.interfered_request_id)
                                                  : JsonValue();
    }
    writer.Key("error").Value(*error);
  }
  writer.EndObject();
  return json;
}

// The reply: the JSON alone, or multipart with the segments, which stay where the worker put
// them until the reply is written (the reply owns the result JSON).
HttpReply PackOutcomeReply(const OutcomeContext& context, const pool::JobResult& result,
                           const CheckedOutcome& checked, std::string json) {
  const RequestEnding ending =
      checked.failed ? RequestEnding::kProgramFailed : RequestEnding::kCompleted;
  if (checked.segments.empty()) {
    return BodyReply(ending, "application/json", std::move(json), context.request_id);
  }
  auto pieces = std::make_shared<PiecesBody>();
  pieces->result_json = std::move(json);
  pieces->keep = result.run.parts.keeper();
  std::vector<protocol::OutgoingPart> parts = {{"result", "application/json", pieces->result_json}};
  for (size_t k = 0; k < checked.segments.size(); ++k) {
    parts.push_back(
        {"return:" + std::to_string(k), "application/octet-stream", checked.segments[k]});
  }
  pieces->encoded = protocol::WriteMultipart(parts);
  HttpReply reply = BodyReply(ending, pieces->encoded.content_type, "", context.request_id);
  reply.pieces = std::move(pieces);
  return reply;
}

HttpReply TooLarge(const OutcomeContext& context, const std::string& what, uint64_t bytes) {
  return EndingReply(RequestEnding::kResponseTooLarge,
                     what + std::to_string(bytes) + " bytes, over max_response_bytes " +
                         std::to_string(context.max_response_bytes),
                     context.request_id);
}

HttpReply FromOutcome(const OutcomeContext& context, pool::JobResult& result) {
  // The reply holds at least the outcome's results and every binary part
  // (json_writer.h spells strings as the worker does), so a bigger outcome
  // can be refused before it is parsed at all.
  const uint64_t outcome_bytes =
      std::max<uint64_t>(result.run.outcome_bytes, result.run.outcome_json.size()) +
      result.run.parts.view().size();
  if (outcome_bytes > context.max_response_bytes) {
    return TooLarge(context, "the worker's outcome is ", outcome_bytes);
  }
  StatusOr<CheckedOutcome> checked = CheckOutcome(context, result);
  if (!checked.ok()) {
    return EndingReply(RequestEnding::kInvalidWorkerResponse,
                       "invalid worker response: " + checked.status().message(),
                       context.request_id);
  }
  // Sealed benchmark results are checked here, with the key of the worker that ran this request.
  std::string integrity;
  if (MayHoldIntegrity(result.run.outcome_json)) {
    integrity = VerifySealedResults(*checked->outcome.Find("results"),
                                    {context.request_id, result.run.seal_key, context.program,
                                     SpanConditions(result.run)})
                    .Verdict();
  }
  std::string json = WriteOutcomeBody(context, result, *checked);
  HttpReply reply = PackOutcomeReply(context, result, *checked, std::move(json));
  if (const JsonValue* error = checked->outcome.Find("error")) {
    reply.error_kind = error->Find("kind")->string();
    reply.error_message = error->Find("message")->string();
  }
  reply.integrity = std::move(integrity);
  if (reply.body_size() > context.max_response_bytes) {
    return TooLarge(context, "the response is ", reply.body_size());
  }
  return reply;
}

}  // namespace

HttpReply BuildOutcomeReply(const OutcomeContext& context, pool::JobResult& result) {
  if (result.cancelled) {
    return EndingReply(RequestEnding::kCancelled,
                       "the client closed the connection; the program was cancelled",
                       context.request_id);
  }
  if (result.revoked) {
    return EndingReply(RequestEnding::kUnauthorized,
                       "the API key of this request was revoked while it waited for a seat",
                       context.request_id);
  }
  if (!result.ran)
    return EndingReply(RequestEnding::kSaturated, "server saturated", context.request_id);
  if (context.output_limit_bytes == 0) {
    result.run.out = {};
    result.run.err = {};
  }
  switch (result.run.ending) {
    case pool::RunResult::Ending::kTimedOut:
      return EndingReply(RequestEnding::kTimedOut, "execution timed out", context.request_id);
    case pool::RunResult::Ending::kCrashed:
      if (InInstruction(context, result)) {
        return FailedInInstruction(
            context, result, RequestEnding::kCrashedInInstruction, "runtime",
            "worker exited while executing the instruction (" + result.run.message + ")");
      }
      return EndingReply(RequestEnding::kCrashed, "worker crashed (" + result.run.message + ")",
                         context.request_id);
    case pool::RunResult::Ending::kOffLease:
      if (InInstruction(context, result)) {
        return FailedInInstruction(context, result, RequestEnding::kProgramFailed, "gpu_access",
                                   result.run.message);
      }
      return EndingReply(RequestEnding::kInvalidWorkerResponse, result.run.message,
                         context.request_id);
    case pool::RunResult::Ending::kBroken:
      return EndingReply(RequestEnding::kInvalidWorkerResponse,
                         "invalid worker response: " + result.run.message, context.request_id);
    case pool::RunResult::Ending::kOutcome:
      return FromOutcome(context, result);
    case pool::RunResult::Ending::kCancelled:
      break;  // answered above
  }
  return EndingReply(RequestEnding::kInternal, "unreachable: the run ended in no known way",
                     context.request_id);
}

}  // namespace kc::server
