// Frames between the server and its worker processes.
//
// Transport: one SOCK_SEQPACKET socketpair per worker, so every message keeps
// its boundary. A frame is one datagram: a small JSON header (at most
// kMaxHeaderBytes) plus up to kMaxFds file descriptors (SCM_RIGHTS). Bulk data
// (program text, blobs, results) never travels inline: it rides in memfds or
// pipes passed as descriptors (DESIGN.md "Data path").
//
// Message types (header "type"), in the order a request uses them:
//   W->S ready        {pid, describe: {target, versions}, seal_key}   once, after imports;
//                     seal_key: 64 hex characters, the worker's HMAC key for sealed benchmark
//                     records (docs/benchmark-integrity.md), made in C++ just before this frame
//   W->S failed       {error}        instead of ready: the worker cannot serve (sandbox)
//   S->W run          {request_id, workspace, output_limit_bytes, max_response_bytes,
//                      blobs:[sha256...]}
//                     fds: [program.json memfd, stdout pipe, stderr pipe, blob memfds...]
//   W->S instruction  {index}        about to run instruction `index`
//   W->S instruction_end {index}     instruction `index` finished (ok or failed)
//   W->S lease_acquire / lease_release   (GPU servers)
//   S->W lease_granted
//   W->S span_begin / span_end   a benchmark's timed calls, under the lease: no
//                                CUDA context is created or destroyed on the
//                                GPU meanwhile under --housekeeping outside-spans;
//                                counted beside it otherwise (pool/gpu_arbiter.h)
//   S->W span_granted
//   W->S outcome      {retire?, gpu_access_detected_ns?}
//                     fds: [outcome.json memfd, parts memfd]
// GPU workers, once before their first request, as house-keeping (pool/gpu_arbiter.h):
//   S->W initialize   W->S initialized | {type: initialized_failed, error}
// Closing the server's end of the socket tells an idle worker to exit.
//
// The zygote (pool/zygote.h) uses the same framing on its own socket:
//   Z->S ready {pid}; S->Z fork {worker: spec (pool/worker_setup.h)}, fds: [new worker
//   socket]; Z->S forked {pid}
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "base/unique_fd.h"

namespace kc::ipc {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxFds = 250;

namespace frame_type {
constexpr std::string_view kReady = "ready";
constexpr std::string_view kFailed = "failed";
constexpr std::string_view kRun = "run";
constexpr std::string_view kInstruction = "instruction";
constexpr std::string_view kInstructionEnd = "instruction_end";
constexpr std::string_view kLeaseAcquire = "lease_acquire";
constexpr std::string_view kLeaseRelease = "lease_release";
constexpr std::string_view kLeaseGranted = "lease_granted";
constexpr std::string_view kSpanBegin = "span_begin";
constexpr std::string_view kSpanEnd = "span_end";
constexpr std::string_view kSpanGranted = "span_granted";
constexpr std::string_view kOutcome = "outcome";
constexpr std::string_view kInitialize = "initialize";
constexpr std::string_view kInitialized = "initialized";
}  // namespace frame_type

struct Frame {
  nlohmann::json header;
  std::vector<UniqueFd> fds;

  std::string type() const { return header.value("type", ""); }  // a string (ReceiveFrame)

  // A field of a worker's header, only if it has the expected type (an integer
  // that fits int64_t for IntField); nullopt otherwise. A worker runs user code,
  // which can write anything to its socket: never read its header with a
  // throwing accessor.
  std::optional<int64_t> IntField(const char* key) const;
  std::optional<std::string> StringField(const char* key) const;
};

// Sends one frame. Blocking; retries EINTR.
Status SendFrame(int socket_fd, const nlohmann::json& header, const std::vector<int>& fds = {});

// Receives one frame. Blocking. kUnavailable when the peer closed the socket;
// kInternal for a malformed frame (truncated header or descriptors).
StatusOr<Frame> ReceiveFrame(int socket_fd);

// ReceiveFrame, but kDeadlineExceeded if nothing arrives before `deadline`.
StatusOr<Frame> ReceiveFrameBefore(int socket_fd, std::chrono::steady_clock::time_point deadline);

// Creates a SOCK_SEQPACKET socketpair; both ends close-on-exec.
Status MakeSocketPair(UniqueFd* a, UniqueFd* b);

}  // namespace kc::ipc
