// ExecuteRequest: a POST /execute body taken apart and checked (spec/protocol.md
// §1.5, §2): multipart framing, part names and content types, blob hashes,
// the program, and that every supplied blob is referenced.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "protocol/program.h"

namespace kc::protocol {

struct SuppliedBlob {
  std::string sha256;      // verified against the bytes
  std::string_view bytes;  // view into the request body
};

struct ExecuteRequest {
  Program program;
  std::string program_json;  // the raw `program` part, forwarded to the worker
  std::vector<SuppliedBlob> blobs;
};

// `content_type` is the request's Content-Type header. Errors are
// kInvalidArgument with a message naming the part or field.
StatusOr<ExecuteRequest> ParseExecuteRequest(std::string_view content_type, std::string_view body);

}  // namespace kc::protocol
