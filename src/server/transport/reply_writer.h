// WriteReply: an HttpReply written onto a connection, plain or TLS, with the
// headers every reply of ours carries (Server, X-Request-ID, Retry-After,
// Server-Timing).
#pragma once

#include <boost/asio.hpp>

#include "server/core/http_reply.h"

namespace kc::server {

// A body of pieces goes out as it is, gathered by the kernel from where the
// pieces are (the worker's mapped memfd), or, over TLS, encrypted from there.
// Stream: PlainStream or TlsStream (stream_types.h), instantiated in reply_writer.cc.
template <class Stream>
boost::asio::awaitable<boost::system::error_code> WriteReply(Stream& stream, HttpReply reply,
                                                             unsigned version, bool keep_alive);

}  // namespace kc::server
