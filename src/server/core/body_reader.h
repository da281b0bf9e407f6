// ReadBody: a request body read from the socket in chunks and handed to a
// BodyConsumer as it arrives, so a GiB upload is never held whole in memory
// and its bytes are touched once (issue 11).
//
// Chunks go round a ring of kSlots buffers. Each chunk is Take()n (what it
// holds is found: cheap) and hashed in order on one strand of the parse pool,
// and stored in order on another, while the next chunks are read from the
// socket: receiving, hashing and storing run at once, and a slow stage only
// stalls the others when the ring is full. After a consumer error the rest
// of the body is still read (and dropped), so the client gets its 400 rather
// than a reset while it is still sending.
#pragma once

#include <cstddef>
#include <string_view>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/status.h"

namespace kc::server {

namespace http = boost::beast::http;

class BodyConsumer {
 public:
  // Chunks in flight at most; a chunk's pieces are kept by its slot.
  static constexpr int kSlots = 4;

  virtual ~BodyConsumer() = default;
  // In body order: notes what `chunk` holds, under `slot`. The chunk stays
  // valid until HashTaken and StoreTaken of that slot have returned.
  virtual Status Take(int slot, std::string_view chunk) = 0;
  // The pieces taken under `slot`, each in chunk order. Hashing runs beside
  // storing, and beside the Take of a later chunk, so the three share no state.
  virtual void HashTaken(int slot) = 0;
  virtual Status StoreTaken(int slot) = 0;
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
// Stream: PlainStream or TlsStream (stream_types.h), instantiated in body_reader.cc.
template <class Stream>
boost::asio::awaitable<BodyResult> ReadBody(
    Stream& stream, boost::beast::flat_buffer& buffer,
    boost::beast::http::request_parser<boost::beast::http::buffer_body>& parser,
    BodyConsumer* consumer, boost::asio::thread_pool& pool);

}  // namespace kc::server
