// Incremental multipart/form-data parser (spec/protocol.md §1.5; RFC 2046
// §5.1.1, RFC 7578). A delimiter line is "--" + boundary at the start of the
// body or right after a LF, followed either by "--" (the close delimiter) or
// by optional spaces/tabs and a CRLF or bare LF. The line break before a
// delimiter (its LF, and a CR before that) belongs to the delimiter, not to
// the part body. Anything before the first delimiter is preamble and
// anything after the close delimiter is epilogue; both are ignored.
//
// Each chunk is searched with memmem, not byte by byte. The bytes after the
// last decided one, which may still begin a delimiter, wait in held_; the
// next chunk decides them by appending a few of its own bytes to them, then
// goes on from there as a view.
#include "protocol/multipart_stream.h"

#include <string.h>  // memmem

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/header_value.h"

namespace kc::protocol {
namespace {

Status PartError(size_t index, std::string_view what) {
  return InvalidArgumentError("multipart part " + std::to_string(index) + ": " + std::string(what));
}

// --- Part headers: the one implementation of §1.5's per-part rules -----------

struct PartHeaders {
  std::string name;          // Content-Disposition name parameter
  std::string content_type;  // the Content-Type header value, as sent (trimmed)
};

// Checks the header lines of part `index` up to the first empty line of
// `block`; bytes after that line are not looked at.
class PartHeaderParser {
 public:
  explicit PartHeaderParser(size_t index) : index_(index) {}

  StatusOr<PartHeaders> Parse(std::string_view block);

 private:
  Status Header(std::string_view line);
  Status ContentDisposition(std::string_view value);
  Status ContentType(std::string_view value);
  Status TransferEncoding(std::string_view value);

  Status Error(std::string_view what) const { return PartError(index_, what); }

  size_t index_;
  PartHeaders headers_;
  int dispositions_ = 0;
  int content_types_ = 0;
  int encodings_ = 0;
};

StatusOr<PartHeaders> PartHeaderParser::Parse(std::string_view block) {
  size_t pos = 0;
  for (;;) {
    size_t lf = block.find('\n', pos);
    if (lf == std::string_view::npos) return Error("headers are not ended by an empty line");
    std::string_view line = block.substr(pos, lf - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = lf + 1;
    if (line.empty()) break;
    KC_RETURN_IF_ERROR(Header(line));
  }
  if (dispositions_ != 1) return Error("expected exactly one Content-Disposition header");
  if (content_types_ != 1) return Error("expected exactly one Content-Type header");
  return std::move(headers_);
}

Status PartHeaderParser::Header(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') {
    return Error("folded header lines are not supported");
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0 ||
      TrimWhitespace(line.substr(0, colon)).size() != colon) {
    return Error("malformed header line");
  }
  std::string name = AsciiLower(line.substr(0, colon));
  std::string_view value = TrimWhitespace(line.substr(colon + 1));
  if (name == "content-disposition") return ContentDisposition(value);
  if (name == "content-type") return ContentType(value);
  if (name == "content-transfer-encoding") return TransferEncoding(value);
  return Status::Ok();  // other headers carry nothing we use
}

Status PartHeaderParser::ContentDisposition(std::string_view value) {
  if (++dispositions_ > 1) return Error("more than one Content-Disposition header");
  StatusOr<HeaderValue> parsed = ParseHeaderValue(value);
  if (!parsed.ok()) return Error("Content-Disposition: " + parsed.status().message());
  if (parsed->type != "form-data") return Error("Content-Disposition must be form-data");
  std::vector<std::string> names = parsed->Get("name");
  if (names.size() != 1 || names[0].empty()) {
    return Error("Content-Disposition needs exactly one non-empty name parameter");
  }
  headers_.name = std::move(names[0]);  // a filename parameter is allowed and ignored
  return Status::Ok();
}

Status PartHeaderParser::ContentType(std::string_view value) {
  if (++content_types_ > 1) return Error("more than one Content-Type header");
  if (value.empty()) return Error("empty Content-Type header");
  std::string media_type = AsciiLower(TrimWhitespace(value.substr(0, value.find(';'))));
  if (media_type.rfind("multipart/", 0) == 0) return Error("nested multipart is not supported");
  headers_.content_type = std::string(value);
  return Status::Ok();
}

Status PartHeaderParser::TransferEncoding(std::string_view value) {
  if (++encodings_ > 1) return Error("more than one Content-Transfer-Encoding header");
  std::string encoding = AsciiLower(value);
  if (encoding != "binary" && encoding != "8bit") {
    return Error("Content-Transfer-Encoding must be binary or 8bit");
  }
  return Status::Ok();
}

// --- Delimiters ----------------------------------------------------------------

// kUndecided: the window ends before the bytes there can be told apart.
enum class Verdict { kNo, kYes, kUndecided };

struct Delimiter {
  Verdict verdict = Verdict::kNo;
  size_t start = 0;  // kYes: where the part data before it ends; kUndecided: what to hold
  size_t next = 0;   // kYes: the first byte after it
  bool close = false;
  bool in_blanks = false;  // kUndecided: a whole marker, then blanks to the window's end
};

// Classifies the bytes after a "--boundary" that ends at `after`: "--" closes,
// blanks and then a CRLF or LF end a delimiter line, anything else is data.
Delimiter ClassifyAfterMarker(std::string_view window, size_t after) {
  Delimiter d;
  if (after < window.size() && window[after] == '-') {
    if (after + 1 == window.size()) return {.verdict = Verdict::kUndecided};
    if (window[after + 1] != '-') return d;
    return {.verdict = Verdict::kYes, .next = after + 2, .close = true};
  }
  size_t end = window.find_first_not_of(" \t", after);
  if (end == std::string_view::npos) return {.verdict = Verdict::kUndecided, .in_blanks = true};
  if (window[end] == '\n') return {.verdict = Verdict::kYes, .next = end + 1};
  if (window[end] != '\r') return d;
  if (end + 1 == window.size()) return {.verdict = Verdict::kUndecided};
  if (window[end + 1] != '\n') return d;
  return {.verdict = Verdict::kYes, .next = end + 2};
}

// window.find(marker, from), with glibc's memmem: string_view::find stops at
// every first byte (each LF), which in text is every few dozen bytes, and
// memmem keeps several GB/s there as well.
size_t FindMarker(std::string_view window, size_t from, std::string_view marker) {
  if (from > window.size()) return std::string_view::npos;
  const void* found =
      memmem(window.data() + from, window.size() - from, marker.data(), marker.size());
  return found == nullptr ? std::string_view::npos
                          : static_cast<const char*>(found) - window.data();
}

// Finds the first delimiter of `window` at or after `from`, which is where the
// current part (or the window) starts: the first kYes, or the first kUndecided
// before any kYes. `at_body_start`: window[from] is the body's first byte.
Delimiter FindDelimiter(std::string_view window, size_t from, std::string_view dash_boundary,
                        std::string_view line_marker, bool at_body_start) {
  if (at_body_start) {
    std::string_view head = window.substr(from, dash_boundary.size());
    if (head.size() < dash_boundary.size()) {
      if (dash_boundary.starts_with(head)) return {.verdict = Verdict::kUndecided, .start = from};
    } else if (head == dash_boundary) {
      Delimiter d = ClassifyAfterMarker(window, from + dash_boundary.size());
      d.start = from;
      if (d.verdict != Verdict::kNo) return d;
    }
  }
  auto start_of = [&](size_t lf) { return lf > from && window[lf - 1] == '\r' ? lf - 1 : lf; };
  for (size_t lf = FindMarker(window, from, line_marker); lf != std::string_view::npos;
       lf = FindMarker(window, lf + 1, line_marker)) {
    Delimiter d = ClassifyAfterMarker(window, lf + line_marker.size());
    d.start = start_of(lf);
    if (d.verdict != Verdict::kNo) return d;
  }
  // A LF close to the end, followed by the start of the marker.
  size_t tail = window.size() - std::min(window.size(), line_marker.size() - 1);
  for (size_t lf = window.find('\n', std::max(from, tail)); lf != std::string_view::npos;
       lf = window.find('\n', lf + 1)) {
    if (line_marker.starts_with(window.substr(lf))) {
      return {.verdict = Verdict::kUndecided, .start = start_of(lf)};
    }
  }
  return {};
}

}  // namespace

MultipartStream::MultipartStream(std::string boundary, MultipartSink& sink)
    : dash_boundary_("--" + boundary), line_marker_("\n" + dash_boundary_), sink_(sink) {
  if (boundary.empty()) status_ = InvalidArgumentError("empty multipart boundary");
}

Status MultipartStream::Feed(std::string_view chunk) {
  size_t pos = 0;
  // Decide the held bytes first, with as few bytes of `chunk` as that takes.
  while (status_.ok() && !held_.empty() && pos < chunk.size()) {
    if (held_in_blanks_) {  // a long run of blanks is appended without scanning it again
      size_t blanks = std::min(chunk.find_first_not_of(" \t", pos), chunk.size()) - pos;
      held_.append(chunk.substr(pos, blanks));
      pos += blanks;
      if (pos == chunk.size()) break;
    }
    size_t held = held_.size();
    // Enough to finish any marker held and to see the two bytes after it.
    size_t take = std::min(chunk.size() - pos, line_marker_.size() + 3);
    held_.append(chunk.substr(pos, take));
    pos += take;
    size_t consumed = Scan(held_);
    if (consumed >= held) {  // the rest of what was appended is read again from `chunk`
      pos -= held_.size() - consumed;
      held_.clear();
    } else {
      held_.erase(0, consumed);
    }
  }
  if (status_.ok() && held_.empty()) {
    std::string_view rest = chunk.substr(pos);
    held_.assign(rest.substr(Scan(rest)));
  }
  return status_;
}

Status MultipartStream::Finish() {
  if (!status_.ok()) return status_;
  // Bytes still held cannot complete a delimiter: a body cannot end inside one.
  if (state_ == State::kPreamble) {
    status_ = InvalidArgumentError("multipart body has no boundary line");
  } else if (state_ != State::kEpilogue) {
    status_ = InvalidArgumentError("multipart body is missing its closing boundary");
  }
  return status_;
}

// Consumes `window` up to its first undecided byte and returns where that is.
size_t MultipartStream::Scan(std::string_view window) {
  size_t pos = 0;
  held_in_blanks_ = false;
  while (status_.ok() && state_ != State::kEpilogue && pos < window.size()) {
    bool preamble = state_ == State::kPreamble;
    Delimiter d =
        FindDelimiter(window, pos, dash_boundary_, line_marker_, preamble && !started_ && pos == 0);
    if (d.verdict == Verdict::kYes) {
      if (!preamble) RegionBytes(window.substr(pos, d.start - pos));
      if (status_.ok()) FoundDelimiter(d.close);
      pos = d.next;
      started_ = true;
      continue;
    }
    size_t end = d.verdict == Verdict::kUndecided ? d.start : window.size();
    // A part's last CR waits: a LF starting a delimiter may follow it.
    if (d.verdict == Verdict::kNo && !preamble && window.back() == '\r') --end;
    if (!preamble) RegionBytes(window.substr(pos, end - pos));
    held_in_blanks_ = d.in_blanks;
    if (end > 0) started_ = true;
    return end;
  }
  return state_ == State::kEpilogue ? window.size() : pos;
}

void MultipartStream::FoundDelimiter(bool close) {
  switch (state_) {
    case State::kPreamble:
      if (close) {
        status_ = InvalidArgumentError("multipart body has no parts");
        return;
      }
      break;
    case State::kHeaders: {
      // The part ended inside its header block, so this is the error saying why.
      StatusOr<PartHeaders> headers = PartHeaderParser(parts_).Parse(header_block_);
      status_ =
          headers.ok() ? InternalError("multipart header block ended twice") : headers.status();
      return;
    }
    case State::kBody:
      status_ = sink_.EndPart();
      if (!status_.ok()) return;
      ++parts_;
      break;
    case State::kSkip:
      status_ = header_error_;
      return;
    case State::kEpilogue:
      return;
  }
  state_ = close ? State::kEpilogue : State::kHeaders;
  header_block_.clear();
  header_line_start_ = 0;
}

void MultipartStream::RegionBytes(std::string_view bytes) {
  if (bytes.empty() || !status_.ok()) return;
  switch (state_) {
    case State::kHeaders:
      HeaderBytes(bytes);
      break;
    case State::kBody:
      status_ = sink_.PartData(bytes);
      break;
    case State::kPreamble:
    case State::kSkip:
    case State::kEpilogue:
      break;
  }
}

// Buffers header bytes until the first empty line ("" or "\r" before a LF);
// what follows it is the part's body.
void MultipartStream::HeaderBytes(std::string_view bytes) {
  size_t base = header_block_.size();  // the offset of bytes[0] in the block
  std::string_view room = bytes.substr(0, kMaxPartHeaderBlock - base);
  for (size_t lf = room.find('\n'); lf != std::string_view::npos; lf = room.find('\n', lf + 1)) {
    size_t length = base + lf - header_line_start_;
    bool empty = length == 0 || (length == 1 && (header_line_start_ < base
                                                     ? header_block_[header_line_start_]
                                                     : bytes[header_line_start_ - base]) == '\r');
    header_line_start_ = base + lf + 1;
    if (empty) {
      header_block_.append(bytes.substr(0, lf + 1));
      EndHeaders();
      RegionBytes(bytes.substr(lf + 1));
      return;
    }
  }
  if (room.size() < bytes.size()) {
    status_ = PartError(
        parts_, "header block exceeds " + std::to_string(kMaxPartHeaderBlock / 1024) + " KiB");
    return;
  }
  header_block_.append(bytes);
}

void MultipartStream::EndHeaders() {
  StatusOr<PartHeaders> headers = PartHeaderParser(parts_).Parse(header_block_);
  header_block_.clear();
  if (!headers.ok()) {
    // Reported when the part ends, as ReadMultipart always has (see Feed).
    header_error_ = headers.status();
    state_ = State::kSkip;
    return;
  }
  state_ = State::kBody;
  status_ = sink_.BeginPart(headers->name, headers->content_type);
}

}  // namespace kc::protocol
