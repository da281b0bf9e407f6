// Fuzzes ParseProgram (spec/protocol.md §2). Invariants on an accepted program:
// non-empty instructions; ids unique and every reference names an earlier id;
// return keys unique and non-empty; blob references are 64 lowercase hex, listed
// once each, and match the uploads that use them (tier flags, tensor byte sizes);
// file paths are normalized; options within their ranges.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "base/sha256.h"
#include "fuzz_check.h"
#include "protocol/program.h"

namespace {

using kc::protocol::BlobReference;
using kc::protocol::Instruction;
using kc::protocol::Op;
using kc::protocol::Program;
using kc::protocol::ReturnKind;
using kc::protocol::UploadKind;

const BlobReference* FindBlob(const Program& program, const std::string& sha256) {
  for (const BlobReference& blob : program.blobs) {
    if (blob.sha256 == sha256) return &blob;
  }
  return nullptr;
}

bool IsNormalized(const std::string& path) {
  kc::StatusOr<std::string> normalized = kc::protocol::NormalizeWorkspacePath(path);
  return normalized.ok() && *normalized == path;
}

void CheckProgram(const Program& program) {
  KC_FUZZ_CHECK(!program.instructions.empty());
  if (program.options.timeout_seconds) {
    KC_FUZZ_CHECK(std::isfinite(*program.options.timeout_seconds));
    KC_FUZZ_CHECK(*program.options.timeout_seconds > 0);
  }
  if (program.options.output_limit_bytes) KC_FUZZ_CHECK(*program.options.output_limit_bytes >= 0);
  if (program.options.gpu_count) {
    KC_FUZZ_CHECK(*program.options.gpu_count >= 1 && *program.options.gpu_count <= 8);
  }

  std::set<std::string> blob_hashes;
  for (const BlobReference& blob : program.blobs) {
    KC_FUZZ_CHECK(kc::IsSha256Hex(blob.sha256));
    KC_FUZZ_CHECK(blob_hashes.insert(blob.sha256).second);
    KC_FUZZ_CHECK(blob.used_by_file || blob.used_by_memory);
  }

  std::set<std::string> ids, keys, used_blobs, file_paths;
  for (const Instruction& in : program.instructions) {
    switch (in.op) {
      case Op::kUpload:
        if (in.upload_kind == UploadKind::kModule) {
          KC_FUZZ_CHECK(in.blob.empty());
          if (in.language) KC_FUZZ_CHECK(*in.language == "python" || *in.language == "cuda");
          break;
        }
        {
          const BlobReference* blob = FindBlob(program, in.blob);
          KC_FUZZ_CHECK(blob != nullptr);
          used_blobs.insert(in.blob);
          if (in.upload_kind == UploadKind::kFile) {
            KC_FUZZ_CHECK(blob->used_by_file);
            KC_FUZZ_CHECK(IsNormalized(in.path));
            KC_FUZZ_CHECK(file_paths.insert(in.path).second);
          } else {
            KC_FUZZ_CHECK(blob->used_by_memory);
          }
          if (in.upload_kind == UploadKind::kTensor) {
            int item = kc::protocol::DtypeItemSize(in.dtype);
            KC_FUZZ_CHECK(item > 0);
            KC_FUZZ_CHECK(blob->tensor_bytes.has_value());
            uint64_t bytes = static_cast<uint64_t>(item);
            bool overflow = false, empty = false;
            for (int64_t dim : in.shape) {
              KC_FUZZ_CHECK(dim >= 0);
              empty = empty || dim == 0;
              overflow =
                  overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes);
            }
            if (empty) bytes = 0;
            KC_FUZZ_CHECK(empty || !overflow);
            KC_FUZZ_CHECK(*blob->tensor_bytes == bytes);
          }
        }
        break;
      case Op::kGetFunction:
        KC_FUZZ_CHECK(ids.count(in.module_ref));
        KC_FUZZ_CHECK(!in.name.empty());
        break;
      case Op::kRun:
        KC_FUZZ_CHECK(ids.count(in.fn_ref));
        KC_FUZZ_CHECK(in.args.is_array());
        break;
      case Op::kReturn:
        KC_FUZZ_CHECK(in.id.empty());
        KC_FUZZ_CHECK(!in.key.empty());
        KC_FUZZ_CHECK(keys.insert(in.key).second);
        if (in.return_kind == ReturnKind::kValue) {
          KC_FUZZ_CHECK(ids.count(in.value_ref));
        } else if (in.path_ref) {
          KC_FUZZ_CHECK(ids.count(*in.path_ref));
        } else {
          KC_FUZZ_CHECK(IsNormalized(in.path));
        }
        break;
    }
    if (in.op != Op::kReturn) {
      KC_FUZZ_CHECK(!in.id.empty());
      KC_FUZZ_CHECK(ids.insert(in.id).second);
    }
  }
  // Every listed blob is used by some upload, and only those.
  KC_FUZZ_CHECK(used_blobs == blob_hashes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kc::StatusOr<Program> program = kc::protocol::ParseProgram(kc::fuzz::AsText(data, size));
  if (!program.ok()) {
    KC_FUZZ_CHECK(program.status().code() == kc::StatusCode::kInvalidArgument);
    return 0;
  }
  CheckProgram(*program);
  return 0;
}
