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

struct EncodedMultipart {
  std::string content_type;  // "multipart/form-data; boundary=kcoral-..."
  std::string body;
};

EncodedMultipart WriteMultipart(const std::vector<OutgoingPart>& parts);

}  // namespace kc::protocol
