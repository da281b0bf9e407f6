// ExecuteIngest: the body of POST /execute taken in as it arrives
// (spec/protocol.md §1.5). The multipart stream is parsed chunk by chunk;
// each blob part is hashed and written into its memfd while it is received,
// and the program part is collected. Finish() applies the checks that need
// the whole body (missing program, the program itself, unreferenced blobs,
// then blob hashes, in that order as before streaming).
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/execute_request.h"
#include "protocol/multipart_stream.h"
#include "server/core/body_reader.h"
#include "store/blob_builder.h"

namespace kc::server {

struct IngestedExecute {
  protocol::ExecuteRequest request;
  std::unordered_map<std::string, store::BlobPtr> supplied;  // the blob parts, by hash
};

class ExecuteIngest : public BodyConsumer, private protocol::MultipartSink {
 public:
  // Refuses a Content-Type that is not multipart/form-data with a boundary.
  static StatusOr<std::unique_ptr<ExecuteIngest>> Start(std::string_view content_type);

  Status Take(int slot, std::string_view chunk) override;
  void HashTaken(int slot) override;
  Status StoreTaken(int slot) override;
  StatusOr<IngestedExecute> Finish();

 private:
  explicit ExecuteIngest(std::string boundary) : stream_(std::move(boundary), *this) {}

  Status BeginPart(std::string_view name, std::string_view content_type) override;
  Status PartData(std::string_view bytes) override;
  Status EndPart() override;

  struct BlobPart {
    std::string sha256;  // as its name claims
    store::BlobBuilder builder;
  };
  struct Piece {
    BlobPart* blob;  // null: the program part
    std::string_view bytes;
  };
  // What one chunk held.
  struct Taken {
    std::string_view chunk;
    std::vector<Piece> pieces;
    std::deque<std::string> held_copies;  // pieces from the stream's own buffer
  };

  protocol::MultipartStream stream_;
  protocol::ExecuteParts parts_;
  std::string program_json_;
  std::vector<std::unique_ptr<BlobPart>> blobs_;  // Take adds; the stages hold pointers
  std::optional<BlobPart*> current_;              // the part being read (null: program)
  Taken* taking_ = nullptr;                       // the slot being taken
  std::array<Taken, kSlots> taken_;
};

}  // namespace kc::server
