// Frames between the server and its worker processes.
//
// Transport: one SOCK_SEQPACKET socketpair per worker, so every message keeps
// its boundary. A frame is one datagram: a small JSON header (at most
// kMaxHeaderBytes) plus up to kMaxFds file descriptors (SCM_RIGHTS). Bulk data
// (program text, blobs, results) never travels inline: it rides in memfds or
// pipes passed as descriptors (DESIGN.md "Data path").
//
// The messages themselves, their words and fields, are ipc/messages.h: nothing else builds or
// reads a frame header.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace kc::ipc {

constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr size_t kMaxFds = 250;

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
StatusOr<Frame> ReceiveFrameBefore(int socket_fd, Clock::time_point deadline);

// Creates a SOCK_SEQPACKET socketpair; both ends close-on-exec.
Status MakeSocketPair(UniqueFd* a, UniqueFd* b);

}  // namespace kc::ipc
