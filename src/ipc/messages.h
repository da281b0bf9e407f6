// The vocabulary between the server and its workers (and the zygote): one MessageType per
// frame word, one struct per message that carries fields, each with its encode and decode.
// No frame header is built or read by hand anywhere else; Python's zygote gets its messages
// through kcoral._core (worker/module.cc: ready_message, forked_message, failed_message,
// fork_spec, receive_start), never respelled.
// docs/worker-conversation.md has the table; the golden tests
// (tests/unit/ipc/messages_test.cc) pin every message's wire form.
//
// Transport (frame.h): one SOCK_SEQPACKET datagram per message, a JSON header of at most
// kMaxHeaderBytes plus descriptors. A worker runs user code, which can write anything to its
// socket: every Decode checks each field's type and never throws.
//
//   S->W start            {settings: WorkerSettings (ipc/worker_settings.h), worker?: WorkerSpec}
//                         first on a new interpreter's socket: the zygote's (no worker), or a
//                         worker's started without a zygote
//   W->S ready            {pid, describe, seal_key}   once, after imports (the zygote: {pid})
//   W->S failed           {error}                     instead of ready: it cannot serve
//   S->W initialize       GPU workers, once, as house-keeping (pool/gpu_arbiter.h): the CUDA
//                         context, its first allocation, the libraries
//   W->S initialized | initialize_failed {error}
//   S->W warm_up          then, as house-keeping that runs GPU kernels: CUPTI, the L2 flush
//                         buffer, common kernels loaded
//   W->S warmed_up | initialize_failed {error}
//   S->W run              {request_id, workspace, output_limit_bytes, max_response_bytes,
//                          blobs: [sha256...]}  fds: [program memfd, stdout, stderr, blobs...]
//   W->S instruction / instruction_end  {index}
//   W->S lease_acquire, lease_release;  S->W lease_granted
//   W->S span_begin, span_end;          S->W span_granted
//   W->S outcome          {retire?, gpu_access_detected_ns?}  fds: [outcome memfd, parts memfd]
//   S->Z fork             {worker: WorkerSpec (ipc/sandbox_spec.h)}  fds: [the new worker's socket]
//   Z->S forked           {pid, namespace_init?}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "ipc/frame.h"
#include "ipc/sandbox_spec.h"
#include "ipc/worker_settings.h"

namespace kc::ipc {

enum class MessageType {
  kStart,
  kReady,
  kFailed,
  kInitialize,
  kInitialized,
  kInitializeFailed,
  kWarmUp,
  kWarmedUp,
  kRun,
  kInstruction,
  kInstructionEnd,
  kLeaseAcquire,
  kLeaseRelease,
  kLeaseGranted,
  kSpanBegin,
  kSpanEnd,
  kSpanGranted,
  kOutcome,
  kFork,
  kForked,
};

// The wire word ("lease_acquire").
std::string_view WordOf(MessageType type);
// The message a frame carries; nullopt for a word outside the vocabulary.
std::optional<MessageType> TypeOf(const Frame& frame);
// A frame's word for an error message, cut to 64 characters (it is the sender's text).
std::string QuotedWord(const Frame& frame);

// Messages without fields: lease_acquire, lease_release, lease_granted, span_begin, span_end,
// span_granted, initialize, initialized, warm_up, warmed_up.
nlohmann::json Signal(MessageType type);

struct StartMessage {
  WorkerSettings settings;
  std::optional<WorkerSpec> worker;  // nullopt: the zygote (its workers come in fork messages)
};

struct ReadyMessage {
  int64_t pid = 0;
  nlohmann::json describe = nlohmann::json::object();  // {target, versions}; absent: zygote
  std::string seal_key;                                // 64 hex characters; empty from the zygote
};

struct FailedMessage {  // failed, and initialize_failed
  std::string error;
};

struct RunMessage {
  std::string request_id;
  std::string workspace;
  int64_t output_limit_bytes = 0;
  int64_t max_response_bytes = 0;
  std::vector<std::string> blobs;  // sha256 of each blob descriptor, after the first three
};

struct ProgressMessage {  // instruction, instruction_end
  int64_t index = -1;
};

struct OutcomeMessage {
  std::optional<std::string> retire;   // the worker asks to be retired, and why
  int64_t gpu_access_detected_ns = 0;  // steady clock; 0: none
};

struct ForkMessage {
  WorkerSpec worker;  // the forked worker's, before the zygote completes its sandbox
};

struct ForkedMessage {
  int64_t pid = 0;
  std::optional<int64_t> namespace_init;  // a sandboxed worker's pid 1
};

nlohmann::json Encode(const StartMessage& message);
nlohmann::json Encode(const ReadyMessage& message);
nlohmann::json Encode(MessageType type,
                      const FailedMessage& message);  // kFailed, kInitializeFailed
nlohmann::json Encode(const RunMessage& message);
nlohmann::json Encode(MessageType type, const ProgressMessage& message);  // kInstruction(End)
nlohmann::json Encode(const OutcomeMessage& message);
nlohmann::json Encode(const ForkMessage& message);
nlohmann::json Encode(const ForkedMessage& message);

// kInternal, naming the message and the field, for a header that is not that message.
StatusOr<StartMessage> DecodeStart(const Frame& frame);
StatusOr<ReadyMessage> DecodeReady(const Frame& frame);
StatusOr<FailedMessage> DecodeFailed(const Frame& frame);  // failed or initialize_failed
StatusOr<RunMessage> DecodeRun(const Frame& frame);
StatusOr<ProgressMessage> DecodeProgress(const Frame& frame);
StatusOr<OutcomeMessage> DecodeOutcome(const Frame& frame);
StatusOr<ForkMessage> DecodeFork(const Frame& frame);
StatusOr<ForkedMessage> DecodeForked(const Frame& frame);

}  // namespace kc::ipc
