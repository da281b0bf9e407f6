#include "server/transport/hang_up_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace kc::server {

namespace net = boost::asio;

HangUpWatch::HangUpWatch(net::any_io_executor executor, int socket_fd,
                         std::shared_ptr<pool::CancelFlag> flag) {
  const int copy = ::fcntl(socket_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return;  // best effort: the request then runs to its end
  descriptor_ = std::make_shared<net::posix::stream_descriptor>(executor, copy);
  descriptor_->async_wait(
      net::posix::stream_descriptor::wait_read,
      [descriptor = descriptor_, flag = std::move(flag)](const boost::system::error_code& ec) {
        if (ec) return;  // stopped: the request finished first
        const int fd = descriptor->native_handle();
        char byte;
        const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        bool hung_up =
            n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
        if (n > 0) {
          // Bytes, then the client's FIN: over TLS the bytes are its close_notify (a TLS client
          // closing with grace), which a peek cannot tell from a next request; the FIN can.
          pollfd state{fd, POLLRDHUP, 0};
          hung_up = ::poll(&state, 1, 0) == 1 && (state.revents & POLLRDHUP) != 0;
        }
        if (hung_up) flag->Raise();
      });
}

HangUpWatch::~HangUpWatch() {
  if (!descriptor_) return;
  boost::system::error_code ignored;
  descriptor_->cancel(ignored);  // its handler runs with operation_aborted and lets go
}

}  // namespace kc::server
