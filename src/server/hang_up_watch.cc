#include "server/hang_up_watch.h"

#include <fcntl.h>
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
        char byte;
        const ssize_t n = ::recv(descriptor->native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        const bool hung_up =
            n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
        if (hung_up) flag->Raise();
      });
}

HangUpWatch::~HangUpWatch() {
  if (!descriptor_) return;
  boost::system::error_code ignored;
  descriptor_->cancel(ignored);  // its handler runs with operation_aborted and lets go
}

}  // namespace kc::server
