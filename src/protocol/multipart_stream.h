// Incremental multipart/form-data parser (spec/protocol.md §1.5): parses a
// body as it arrives, in chunks of any size, and hands each part to a sink
// while it is received. The framing and header rules, the error messages and
// what is accepted are those of ReadMultipart (built on this), whatever the
// chunking. Pure: no I/O.
//
// Memory: part bodies reach the sink as views of the fed chunk. Held back
// between chunks are only the bytes that may still begin a delimiter (the
// line break and "--boundary", or part of them, and the spaces/tabs after a
// whole one: that run is bounded only by the caller's body limit) and a
// part's header block, which is capped at kMaxPartHeaderBlock. Time is
// linear in the body; part bodies are searched with memmem.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kc::protocol {

// A part's header block (its header lines through the empty line that ends
// them) is buffered whole, so it is capped; clients send a few hundred bytes.
// A longer one is kInvalidArgument "multipart part N: header block exceeds
// 64 KiB". This limit is newer than the other rules.
inline constexpr size_t kMaxPartHeaderBlock = 64 * 1024;

// Receives a multipart body's parts as MultipartStream finds them. A non-OK
// status from any call stops the stream, which returns that status.
class MultipartSink {
 public:
  virtual ~MultipartSink() = default;
  // A part's header block was read and passed every framing rule.
  virtual Status BeginPart(std::string_view name, std::string_view content_type) = 0;
  // The next bytes of the current part's body, in order, in any number of
  // non-empty pieces. A piece is valid only during the call.
  virtual Status PartData(std::string_view bytes) = 0;
  // The current part's body is complete: the delimiter after it was seen.
  virtual Status EndPart() = 0;
};

class MultipartStream {
 public:
  MultipartStream(std::string boundary, MultipartSink& sink);
  MultipartStream(const MultipartStream&) = delete;
  MultipartStream& operator=(const MultipartStream&) = delete;

  // Feeds the next bytes of the body. Returns the first error (framing errors
  // are kInvalidArgument; a sink error is returned as is); after an error
  // every call returns it again. Bytes after the close delimiter are ignored.
  //
  // As in ReadMultipart, a part whose header block breaks a rule is reported
  // when the delimiter ending that part arrives; a body that ends before it
  // is refused for its missing closing boundary instead.
  Status Feed(std::string_view chunk);

  // The body has ended: an error unless the close delimiter was seen and
  // there was at least one part.
  Status Finish();

 private:
  enum class State { kPreamble, kHeaders, kBody, kSkip, kEpilogue };

  size_t Scan(std::string_view window);
  void FoundDelimiter(bool close);
  void RegionBytes(std::string_view bytes);
  void HeaderBytes(std::string_view bytes);
  void EndHeaders();

  const std::string dash_boundary_;  // "--" + boundary: a delimiter at body start
  const std::string line_marker_;    // "\n--" + boundary: a delimiter anywhere else
  MultipartSink& sink_;
  Status status_;  // the first error; sticky
  State state_ = State::kPreamble;
  size_t parts_ = 0;      // parts completed, and so the current part's index
  bool started_ = false;  // a byte of the body was consumed: no delimiter at body start

  // Undecided bytes from the end of the last chunk: they begin at a possible
  // delimiter (or are one CR of a part, which a delimiter's LF may follow).
  std::string held_;
  bool held_in_blanks_ = false;  // held_ is a whole marker and then only blanks

  std::string header_block_;      // the current part's header bytes so far
  size_t header_line_start_ = 0;  // where its unfinished last line starts
  Status header_error_;           // kSkip: why the header block was refused
};

}  // namespace kc::protocol
