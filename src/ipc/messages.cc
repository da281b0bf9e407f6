#include "ipc/messages.h"

#include <array>
#include <utility>

namespace kc::ipc {
namespace {

constexpr std::array<std::pair<MessageType, std::string_view>, 20> kWords = {{
    {MessageType::kStart, "start"},
    {MessageType::kReady, "ready"},
    {MessageType::kFailed, "failed"},
    {MessageType::kInitialize, "initialize"},
    {MessageType::kInitialized, "initialized"},
    {MessageType::kInitializeFailed, "initialize_failed"},
    {MessageType::kWarmUp, "warm_up"},
    {MessageType::kWarmedUp, "warmed_up"},
    {MessageType::kRun, "run"},
    {MessageType::kInstruction, "instruction"},
    {MessageType::kInstructionEnd, "instruction_end"},
    {MessageType::kLeaseAcquire, "lease_acquire"},
    {MessageType::kLeaseRelease, "lease_release"},
    {MessageType::kLeaseGranted, "lease_granted"},
    {MessageType::kSpanBegin, "span_begin"},
    {MessageType::kSpanEnd, "span_end"},
    {MessageType::kSpanGranted, "span_granted"},
    {MessageType::kOutcome, "outcome"},
    {MessageType::kFork, "fork"},
    {MessageType::kForked, "forked"},
}};

std::optional<MessageType> TypeOfWord(std::string_view word) {
  for (const auto& [type, text] : kWords) {
    if (text == word) return type;
  }
  return std::nullopt;
}

nlohmann::json HeaderOf(MessageType type) {
  return {{"type", WordOf(type)}};
}

// Checked field reads: a missing or mistyped field is an error naming the message and field.
class Fields {
 public:
  Fields(const Frame& frame, MessageType expected) : frame_(frame), expected_(expected) {}

  Status Is() const {
    if (TypeOf(frame_) == expected_) return Status::Ok();
    return InternalError("expected a " + std::string(WordOf(expected_)) + " frame, got " +
                         QuotedWord(frame_));
  }
  StatusOr<int64_t> Int(const char* key) const {
    std::optional<int64_t> value = frame_.IntField(key);
    if (!value) return Bad(key, "an integer");
    return *value;
  }
  std::optional<int64_t> OptionalInt(const char* key) const { return frame_.IntField(key); }
  StatusOr<std::string> String(const char* key) const {
    std::optional<std::string> value = frame_.StringField(key);
    if (!value) return Bad(key, "a string");
    return *value;
  }
  bool Has(const char* key) const { return frame_.header.contains(key); }
  const nlohmann::json* Json(const char* key) const {
    auto it = frame_.header.find(key);
    return it == frame_.header.end() ? nullptr : &*it;
  }
  Status Bad(const char* key, const char* what) const {
    return InternalError(std::string(WordOf(expected_)) + " frame: field '" + key + "' is not " +
                         what);
  }

 private:
  const Frame& frame_;
  MessageType expected_;
};

}  // namespace

std::string_view WordOf(MessageType type) {
  for (const auto& [known, text] : kWords) {
    if (known == type) return text;
  }
  return "";
}

std::optional<MessageType> TypeOf(const Frame& frame) {
  std::optional<std::string> word = frame.StringField("type");
  return word ? TypeOfWord(*word) : std::nullopt;
}

std::string QuotedWord(const Frame& frame) {
  return frame.StringField("type").value_or("(no type)").substr(0, 64);
}

nlohmann::json Signal(MessageType type) {
  return HeaderOf(type);
}

nlohmann::json Encode(const StartMessage& message) {
  nlohmann::json header = HeaderOf(MessageType::kStart);
  header["settings"] = Encode(message.settings);
  if (message.worker) header["worker"] = Encode(*message.worker);
  return header;
}

nlohmann::json Encode(const ReadyMessage& message) {
  nlohmann::json header = HeaderOf(MessageType::kReady);
  header["pid"] = message.pid;
  if (!message.seal_key.empty()) {
    header["describe"] = message.describe;
    header["seal_key"] = message.seal_key;
  }
  return header;
}

nlohmann::json Encode(MessageType type, const FailedMessage& message) {
  nlohmann::json header = HeaderOf(type);
  header["error"] = message.error;
  return header;
}

nlohmann::json Encode(const RunMessage& message) {
  nlohmann::json header = HeaderOf(MessageType::kRun);
  header["request_id"] = message.request_id;
  header["workspace"] = message.workspace;
  header["output_limit_bytes"] = message.output_limit_bytes;
  header["max_response_bytes"] = message.max_response_bytes;
  header["blobs"] = message.blobs;
  return header;
}

nlohmann::json Encode(MessageType type, const ProgressMessage& message) {
  nlohmann::json header = HeaderOf(type);
  header["index"] = message.index;
  return header;
}

nlohmann::json Encode(const OutcomeMessage& message) {
  nlohmann::json header = HeaderOf(MessageType::kOutcome);
  if (message.retire) header["retire"] = *message.retire;
  if (message.gpu_access_detected_ns != 0) {
    header["gpu_access_detected_ns"] = message.gpu_access_detected_ns;
  }
  return header;
}

nlohmann::json Encode(const ForkMessage& message) {
  nlohmann::json header = HeaderOf(MessageType::kFork);
  header["worker"] = Encode(message.worker);
  return header;
}

nlohmann::json Encode(const ForkedMessage& message) {
  nlohmann::json header = HeaderOf(MessageType::kForked);
  header["pid"] = message.pid;
  if (message.namespace_init) header["namespace_init"] = *message.namespace_init;
  return header;
}

StatusOr<StartMessage> DecodeStart(const Frame& frame) {
  Fields fields(frame, MessageType::kStart);
  KC_RETURN_IF_ERROR(fields.Is());
  StartMessage message;
  const nlohmann::json* settings = fields.Json("settings");
  if (settings == nullptr || !settings->is_object()) return fields.Bad("settings", "an object");
  StatusOr<WorkerSettings> decoded = DecodeWorkerSettings(*settings);
  if (!decoded.ok()) return InternalError("start frame: " + decoded.status().message());
  message.settings = std::move(decoded).value();
  if (const nlohmann::json* worker = fields.Json("worker")) {
    StatusOr<WorkerSpec> spec = DecodeWorkerSpec(*worker);
    if (!spec.ok()) return InternalError("start frame: " + spec.status().message());
    message.worker = std::move(spec).value();
  }
  return message;
}

StatusOr<ReadyMessage> DecodeReady(const Frame& frame) {
  Fields fields(frame, MessageType::kReady);
  KC_RETURN_IF_ERROR(fields.Is());
  ReadyMessage message;
  KC_ASSIGN_OR_RETURN(message.pid, fields.Int("pid"));
  if (fields.Has("seal_key")) {
    KC_ASSIGN_OR_RETURN(message.seal_key, fields.String("seal_key"));
  }
  if (const nlohmann::json* describe = fields.Json("describe")) {
    if (!describe->is_object()) return fields.Bad("describe", "an object");
    message.describe = *describe;
  }
  return message;
}

StatusOr<FailedMessage> DecodeFailed(const Frame& frame) {
  const MessageType type = TypeOf(frame) == MessageType::kInitializeFailed
                               ? MessageType::kInitializeFailed
                               : MessageType::kFailed;
  Fields fields(frame, type);
  KC_RETURN_IF_ERROR(fields.Is());
  FailedMessage message;
  message.error = frame.StringField("error").value_or("(no reason)");
  return message;
}

StatusOr<RunMessage> DecodeRun(const Frame& frame) {
  Fields fields(frame, MessageType::kRun);
  KC_RETURN_IF_ERROR(fields.Is());
  RunMessage message;
  KC_ASSIGN_OR_RETURN(message.request_id, fields.String("request_id"));
  KC_ASSIGN_OR_RETURN(message.workspace, fields.String("workspace"));
  KC_ASSIGN_OR_RETURN(message.output_limit_bytes, fields.Int("output_limit_bytes"));
  KC_ASSIGN_OR_RETURN(message.max_response_bytes, fields.Int("max_response_bytes"));
  const nlohmann::json* blobs = fields.Json("blobs");
  if (blobs == nullptr || !blobs->is_array()) return fields.Bad("blobs", "an array");
  for (const nlohmann::json& blob : *blobs) {
    if (!blob.is_string()) return fields.Bad("blobs", "an array of strings");
    message.blobs.push_back(blob.get<std::string>());
  }
  return message;
}

StatusOr<ProgressMessage> DecodeProgress(const Frame& frame) {
  const MessageType type = TypeOf(frame) == MessageType::kInstructionEnd
                               ? MessageType::kInstructionEnd
                               : MessageType::kInstruction;
  Fields fields(frame, type);
  KC_RETURN_IF_ERROR(fields.Is());
  ProgressMessage message;
  KC_ASSIGN_OR_RETURN(message.index, fields.Int("index"));
  return message;
}

StatusOr<OutcomeMessage> DecodeOutcome(const Frame& frame) {
  Fields fields(frame, MessageType::kOutcome);
  KC_RETURN_IF_ERROR(fields.Is());
  OutcomeMessage message;
  if (fields.Has("retire")) message.retire = frame.StringField("retire").value_or("");
  message.gpu_access_detected_ns = fields.OptionalInt("gpu_access_detected_ns").value_or(0);
  return message;
}

StatusOr<ForkMessage> DecodeFork(const Frame& frame) {
  Fields fields(frame, MessageType::kFork);
  KC_RETURN_IF_ERROR(fields.Is());
  const nlohmann::json* worker = fields.Json("worker");
  if (worker == nullptr || !worker->is_object()) return fields.Bad("worker", "an object");
  StatusOr<WorkerSpec> spec = DecodeWorkerSpec(*worker);
  if (!spec.ok()) return InternalError("fork frame: " + spec.status().message());
  return ForkMessage{std::move(spec).value()};
}

StatusOr<ForkedMessage> DecodeForked(const Frame& frame) {
  Fields fields(frame, MessageType::kForked);
  KC_RETURN_IF_ERROR(fields.Is());
  ForkedMessage message;
  KC_ASSIGN_OR_RETURN(message.pid, fields.Int("pid"));
  if (fields.Has("namespace_init")) {
    KC_ASSIGN_OR_RETURN(message.namespace_init, fields.Int("namespace_init"));
  }
  return message;
}

}  // namespace kc::ipc
