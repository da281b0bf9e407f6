#include "ipc/frame.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace kc::ipc {

namespace {
Status Errno(std::string_view what) {
  return InternalError(std::string(what) + ": " + std::strerror(errno));
}
}  // namespace

Status MakeSocketPair(UniqueFd* a, UniqueFd* b) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return Errno("socketpair");
  }
  a->Reset(fds[0]);
  b->Reset(fds[1]);
  return Status::Ok();
}

Status SendFrame(int socket_fd, const nlohmann::json& header, const std::vector<int>& fds) {
  std::string text = header.dump();
  // The ready frame carries the worker's seal key: its text must not stay in freed heap, where
  // user code could find it through /proc/self/mem. Headers are small; wiping them all is cheap.
  struct Wipe {
    std::string& text;
    ~Wipe() { ::explicit_bzero(text.data(), text.size()); }
  } wipe{text};
  if (text.size() > kMaxHeaderBytes) return InternalError("frame header too large");
  if (fds.size() > kMaxFds) return InternalError("too many descriptors in one frame");

  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    control.resize(CMSG_SPACE(sizeof(int) * fds.size()));
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    ssize_t n = ::sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
    if (n >= 0) return Status::Ok();
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) return UnavailableError("peer closed the socket");
    return Errno("sendmsg");
  }
}

StatusOr<Frame> ReceiveFrame(int socket_fd) {
  std::string text(kMaxHeaderBytes, '\0');
  iovec iov{text.data(), text.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFds));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n;
  do {
    n = ::recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == ECONNRESET) return UnavailableError("peer closed the socket");
    return Errno("recvmsg");
  }

  Frame frame;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(cmsg);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, data + i * sizeof(int), sizeof(int));
      frame.fds.emplace_back(fd);
    }
  }
  if (n == 0 && frame.fds.empty()) return UnavailableError("peer closed the socket");
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return InternalError("truncated frame");
  text.resize(static_cast<size_t>(n));
  frame.header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!frame.header.is_object() || !frame.header.contains("type") ||
      !frame.header["type"].is_string()) {
    return InternalError("malformed frame header");
  }
  return frame;
}

std::optional<int64_t> Frame::IntField(const char* key) const {
  auto it = header.find(key);
  if (it == header.end()) return std::nullopt;
  if (it->is_number_integer() && !it->is_number_unsigned()) return it->get<int64_t>();
  if (it->is_number_unsigned() && it->get<uint64_t>() <= uint64_t{INT64_MAX}) {
    return static_cast<int64_t>(it->get<uint64_t>());
  }
  return std::nullopt;
}

std::optional<std::string> Frame::StringField(const char* key) const {
  auto it = header.find(key);
  if (it == header.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

StatusOr<Frame> ReceiveFrameBefore(int socket_fd, Clock::time_point deadline) {
  pollfd p{socket_fd, POLLIN, 0};
  for (;;) {
    int rc = ::poll(&p, 1, MillisecondsLeft(deadline));
    if (rc > 0) return ReceiveFrame(socket_fd);
    if (rc == 0) return DeadlineExceededError("no answer in time");
    if (errno != EINTR) return Errno("poll");
  }
}

}  // namespace kc::ipc
