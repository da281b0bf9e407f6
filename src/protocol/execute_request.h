// ExecuteRequest: a POST /execute body taken apart and checked (spec/protocol.md
// §1.5, §2): multipart framing, part names and content types, blob hashes,
// the program, and that every supplied blob is referenced.
//
// The server reads the body as it arrives (server/execute_ingest.h) and uses
// the pieces one at a time: ExecuteParts for each part's headers, then
// AssembleExecuteRequest once the body is in. ParseExecuteRequest does the
// same on a whole body in memory.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "protocol/program.h"

namespace kc::protocol {

struct SuppliedBlob {
  std::string sha256;      // verified against the bytes
  std::string_view bytes;  // view into the request body (ParseExecuteRequest only)
};

struct ExecuteRequest {
  Program program;
  std::string program_json;  // the raw `program` part, forwarded to the worker
  std::vector<SuppliedBlob> blobs;
};

// What one part of the body is, from its name and Content-Type.
struct PartRole {
  bool is_program = false;
  std::string blob_sha256;  // for a blob part: the hash its name claims
};

// Checks each part's name and Content-Type in body order, against the parts
// before it: unsupported names, malformed blob names, wrong content types and
// duplicates are kInvalidArgument naming the part.
class ExecuteParts {
 public:
  StatusOr<PartRole> Classify(std::string_view name, std::string_view content_type);
  bool have_program() const { return have_program_; }

 private:
  bool have_program_ = false;
  std::unordered_set<std::string> seen_blobs_;
};

// Once the whole body is read: parses the program and checks that every
// supplied blob is referenced. `blobs` are the blob parts in body order, each
// already checked against its bytes by whoever read them.
StatusOr<ExecuteRequest> AssembleExecuteRequest(const ExecuteParts& parts, std::string program_json,
                                                std::vector<SuppliedBlob> blobs);

// The error for a blob part whose bytes hash to `actual`.
Status BlobMismatchError(std::string_view claimed, std::string_view actual);

// The whole body at once (tests, fuzzing). `content_type` is the request's
// Content-Type header. Errors are kInvalidArgument with a message naming the
// part or field.
StatusOr<ExecuteRequest> ParseExecuteRequest(std::string_view content_type, std::string_view body);

}  // namespace kc::protocol
