// Fuzzes ParseExecuteRequest (spec/protocol.md §1.5, §2) with the Content-Type
// fixed to "multipart/form-data; boundary=B" and the input as the body.
// Invariants on an accepted request: its program has instructions and parses
// again from program_json; every supplied blob lies inside the body, is named
// by a unique 64-hex hash that matches its bytes, and is referenced by the program.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "base/sha256.h"
#include "fuzz_check.h"
#include "protocol/execute_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body = kc::fuzz::AsText(data, size);
  kc::StatusOr<kc::protocol::ExecuteRequest> request =
      kc::protocol::ParseExecuteRequest("multipart/form-data; boundary=B", body);
  if (!request.ok()) {
    KC_FUZZ_CHECK(request.status().code() == kc::StatusCode::kInvalidArgument);
    return 0;
  }
  KC_FUZZ_CHECK(!request->program.instructions.empty());
  KC_FUZZ_CHECK(kc::protocol::ParseProgram(request->program_json).ok());
  std::set<std::string> referenced;
  for (const kc::protocol::BlobReference& blob : request->program.blobs) {
    KC_FUZZ_CHECK(kc::IsSha256Hex(blob.sha256));
    referenced.insert(blob.sha256);
  }
  std::set<std::string> supplied;
  for (const kc::protocol::SuppliedBlob& blob : request->blobs) {
    KC_FUZZ_CHECK(kc::IsSha256Hex(blob.sha256));
    KC_FUZZ_CHECK(kc::fuzz::Inside(blob.bytes, body));
    KC_FUZZ_CHECK(kc::Sha256Hex(blob.bytes) == blob.sha256);
    KC_FUZZ_CHECK(supplied.insert(blob.sha256).second);
    KC_FUZZ_CHECK(referenced.count(blob.sha256));
  }
  return 0;
}
