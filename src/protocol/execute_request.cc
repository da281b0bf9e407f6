#include "protocol/execute_request.h"

#include <string>
#include <unordered_set>
#include <utility>

#include "base/sha256.h"
#include "protocol/multipart_reader.h"

namespace kc::protocol {
namespace {

constexpr std::string_view kProgramPart = "program";
constexpr std::string_view kBlobPrefix = "blob:";

std::string Quote(std::string_view text) {
  return "'" + std::string(text) + "'";
}

// Every supplied blob must be used by some upload (§1.5, §3.2 step 2).
Status CheckAllReferenced(const ExecuteRequest& request) {
  std::unordered_set<std::string_view> referenced;
  for (const BlobReference& blob : request.program.blobs)
    referenced.insert(blob.sha256);
  std::string unreferenced;
  for (const SuppliedBlob& blob : request.blobs) {
    if (referenced.count(blob.sha256)) continue;
    if (!unreferenced.empty()) unreferenced += ", ";
    unreferenced += blob.sha256;
  }
  if (unreferenced.empty()) return Status::Ok();
  return InvalidArgumentError("unreferenced blob part(s): " + unreferenced);
}

}  // namespace

StatusOr<PartRole> ExecuteParts::Classify(std::string_view name, std::string_view content_type) {
  PartRole role;
  if (name == kProgramPart) {
    if (have_program_) return InvalidArgumentError("duplicate 'program' part");
    if (content_type != "application/json") {
      return InvalidArgumentError("part 'program' must have Content-Type application/json");
    }
    have_program_ = true;
    role.is_program = true;
    return role;
  }
  if (name.substr(0, kBlobPrefix.size()) != kBlobPrefix) {
    return InvalidArgumentError("unsupported multipart part " + Quote(name));
  }
  std::string_view hash = name.substr(kBlobPrefix.size());
  if (!IsSha256Hex(hash)) {
    return InvalidArgumentError("malformed blob part name " + Quote(name) +
                                ": expected blob:<64 lowercase hex characters>");
  }
  if (content_type != "application/octet-stream") {
    return InvalidArgumentError("part " + Quote(name) +
                                " must have Content-Type application/octet-stream");
  }
  if (!seen_blobs_.emplace(hash).second) {
    return InvalidArgumentError("duplicate blob part " + Quote(name));
  }
  role.blob_sha256 = std::string(hash);
  return role;
}

StatusOr<ExecuteRequest> AssembleExecuteRequest(const ExecuteParts& parts, std::string program_json,
                                                std::vector<SuppliedBlob> blobs) {
  if (!parts.have_program()) return InvalidArgumentError("missing 'program' part");
  ExecuteRequest request;
  request.program_json = std::move(program_json);
  request.blobs = std::move(blobs);
  KC_ASSIGN_OR_RETURN(request.program, ParseProgram(request.program_json));
  KC_RETURN_IF_ERROR(CheckAllReferenced(request));
  return request;
}

Status BlobMismatchError(std::string_view claimed, std::string_view actual) {
  return InvalidArgumentError("blob part 'blob:" + std::string(claimed) +
                              "' does not match its bytes (sha256 " + std::string(actual) + ")");
}

StatusOr<ExecuteRequest> ParseExecuteRequest(std::string_view content_type, std::string_view body) {
  KC_ASSIGN_OR_RETURN(std::string boundary, MultipartBoundary(content_type));
  KC_ASSIGN_OR_RETURN(std::vector<MultipartPart> parts, ReadMultipart(body, boundary));

  ExecuteParts roles;
  std::string program_json;
  std::vector<SuppliedBlob> blobs;
  for (const MultipartPart& part : parts) {
    KC_ASSIGN_OR_RETURN(PartRole role, roles.Classify(part.name, part.content_type));
    if (role.is_program) {
      program_json = std::string(part.body);
    } else {
      blobs.push_back(SuppliedBlob{.sha256 = std::move(role.blob_sha256), .bytes = part.body});
    }
  }
  KC_ASSIGN_OR_RETURN(ExecuteRequest request,
                      AssembleExecuteRequest(roles, std::move(program_json), std::move(blobs)));
  // Hashing is the costly check, so it runs last, on blobs known to be needed.
  for (const SuppliedBlob& blob : request.blobs) {
    if (std::string actual = Sha256Hex(blob.bytes); actual != blob.sha256) {
      return BlobMismatchError(blob.sha256, actual);
    }
  }
  return request;
}

}  // namespace kc::protocol
