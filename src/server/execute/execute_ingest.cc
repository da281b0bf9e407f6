#include "server/execute/execute_ingest.h"

#include <utility>

#include "protocol/multipart_reader.h"

namespace kc::server {

StatusOr<std::unique_ptr<ExecuteIngest>> ExecuteIngest::Start(std::string_view content_type) {
  KC_ASSIGN_OR_RETURN(std::string boundary, protocol::MultipartBoundary(content_type));
  return std::unique_ptr<ExecuteIngest>(new ExecuteIngest(std::move(boundary)));
}

Status ExecuteIngest::Take(int slot, std::string_view chunk) {
  taking_ = &taken_[slot];
  taking_->pieces.clear();
  taking_->held_copies.clear();
  taking_->chunk = chunk;
  return stream_.Feed(chunk);
}

void ExecuteIngest::HashTaken(int slot) {
  for (const Piece& piece : taken_[slot].pieces) {
    if (piece.blob != nullptr) piece.blob->builder.Hash(piece.bytes);
  }
}

Status ExecuteIngest::StoreTaken(int slot) {
  for (const Piece& piece : taken_[slot].pieces) {
    if (piece.blob == nullptr) {
      program_json_.append(piece.bytes);
    } else {
      KC_RETURN_IF_ERROR(piece.blob->builder.Write(piece.bytes));
    }
  }
  return Status::Ok();
}

Status ExecuteIngest::BeginPart(std::string_view name, std::string_view content_type) {
  KC_ASSIGN_OR_RETURN(protocol::PartRole role, parts_.Classify(name, content_type));
  if (role.is_program) {
    current_ = nullptr;
  } else {
    blobs_.push_back(std::make_unique<BlobPart>());
    blobs_.back()->sha256 = std::move(role.blob_sha256);
    current_ = blobs_.back().get();
  }
  return Status::Ok();
}

Status ExecuteIngest::PartData(std::string_view bytes) {
  // A piece outside the chunk is bytes the stream held back from the last
  // one (a few, that might have begun a delimiter): valid only during this
  // call, so kept here until the stages are done.
  const std::string_view chunk = taking_->chunk;
  const bool in_chunk =
      bytes.data() >= chunk.data() && bytes.data() + bytes.size() <= chunk.data() + chunk.size();
  if (!in_chunk) bytes = taking_->held_copies.emplace_back(bytes);
  taking_->pieces.push_back(Piece{*current_, bytes});
  return Status::Ok();
}

Status ExecuteIngest::EndPart() {
  current_.reset();
  return Status::Ok();
}

StatusOr<IngestedExecute> ExecuteIngest::Finish() {
  KC_RETURN_IF_ERROR(stream_.Finish());
  std::vector<protocol::SuppliedBlob> supplied;
  for (const auto& blob : blobs_)
    supplied.push_back(protocol::SuppliedBlob{.sha256 = blob->sha256});
  IngestedExecute out;
  KC_ASSIGN_OR_RETURN(out.request, protocol::AssembleExecuteRequest(
                                       parts_, std::move(program_json_), std::move(supplied)));
  for (const auto& blob : blobs_) {
    if (std::string actual = blob->builder.Digest(); actual != blob->sha256) {
      return protocol::BlobMismatchError(blob->sha256, actual);
    }
    KC_ASSIGN_OR_RETURN(store::BlobPtr sealed, blob->builder.Seal(blob->sha256));
    out.supplied.emplace(blob->sha256, std::move(sealed));
  }
  return out;
}

}  // namespace kc::server
