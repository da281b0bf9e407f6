// Multipart response framing (spec/protocol.md §4.3): a `result` JSON part
// first, then `return:N` octet-stream parts; boundary `kcoral-<32 hex>` chosen
// so that it occurs in no part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kc::protocol {

struct OutgoingPart {
  std::string name;
  std::string content_type;
  std::string_view body;
};

// The body as pieces to write in order: the framing, owned here, and each
// part's body as the view it was given (never copied: a GiB result goes from
// the worker's memfd to the socket as it is). The caller keeps the part
// bodies alive. Moving keeps the views valid (`framing` is allocated once).
struct EncodedMultipart {
  std::string content_type;  // "multipart/form-data; boundary=kcoral-..."
  std::string framing;
  std::vector<std::string_view> pieces;

  size_t size() const;
  std::string Join() const;  // the whole body in one string
};

EncodedMultipart WriteMultipart(const std::vector<OutgoingPart>& parts);

}  // namespace kc::protocol
