// ReadBody: a request body read from the socket in chunks and handed to a
// BodyConsumer as it arrives, so a GiB upload is never held whole in memory
// and its bytes are touched once (issue 11).
//
// Per chunk, the consumer first Take()s it (finds what it holds: cheap), then
// hashes and stores the pieces on two threads of the parse pool at once while
// the next chunk is read from the socket. After a consumer error the rest of
// the body is still read (and dropped), so the client gets its 400 rather
// than a reset while it is still sending.
#pragma once

#include <cstddef>
#include <string_view>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/status.h"

namespace kc::server {

class BodyConsumer {
 public:
  virtual ~BodyConsumer() = default;
  // In body order, on one thread at a time: notes what `chunk` holds. The
  // chunk stays valid until HashTaken and StoreTaken have returned.
  virtual Status Take(std::string_view chunk) = 0;
  // The pieces of the last Take; the two run at once and share no state.
  virtual void HashTaken() = 0;
  virtual Status StoreTaken() = 0;
};

enum class BodyEnd {
  kComplete,  // the whole body was read (the consumer's status says whether it liked it)
  kTooLarge,  // past the parser's body limit: answer 413 and close
  kBroken,    // the connection failed or timed out: nothing can be answered
};

struct BodyResult {
  BodyEnd end = BodyEnd::kComplete;
  Status consumer = Status::Ok();  // the consumer's first error
  size_t bytes = 0;
};

// Reads what is left of the body of the request whose header `parser` has
// read. The stages run on `pool`. A null `consumer` drops the body.
boost::asio::awaitable<BodyResult> ReadBody(
    boost::beast::tcp_stream& stream, boost::beast::flat_buffer& buffer,
    boost::beast::http::request_parser<boost::beast::http::buffer_body>& parser,
    BodyConsumer* consumer, boost::asio::thread_pool& pool);

}  // namespace kc::server
