// HangUpWatch: while a request runs, watches its otherwise idle connection
// and raises the request's CancelFlag when the client closes it (EOF or
// reset), so an abandoned program stops using its worker and GPU.
//
// It waits on a dup of the socket, and its handler owns everything it
// touches, so it may outlive the session. Bytes that arrive instead end the
// watch without cancelling (a pipelined next request), unless the client's
// FIN has come with them (over TLS: its close_notify, then the close).
// Destroying it stops it.
#pragma once

#include <memory>

#include <boost/asio.hpp>

#include "pool/cancel_flag.h"

namespace kc::server {

class HangUpWatch {
 public:
  HangUpWatch(boost::asio::any_io_executor executor, int socket_fd,
              std::shared_ptr<pool::CancelFlag> flag);
  ~HangUpWatch();
  HangUpWatch(const HangUpWatch&) = delete;
  HangUpWatch& operator=(const HangUpWatch&) = delete;

 private:
  std::shared_ptr<boost::asio::posix::stream_descriptor> descriptor_;
};

}  // namespace kc::server
