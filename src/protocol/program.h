// Program: the validated form of the `program` part of POST /execute
// (spec/protocol.md §2). Pure data; parsing and validation live in
// program_parser.cc, strict JSON in strict_json.cc.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::protocol {

enum class Op { kUpload, kGetFunction, kRun, kReturn };

// The ops' names on the wire (spec/protocol.md §2), in Op's order: their one spelling.
inline constexpr std::string_view kOpNames[] = {"upload", "get_function", "run", "return"};
inline std::string_view OpName(Op op) {
  return kOpNames[static_cast<int>(op)];
}
inline std::optional<Op> OpNamed(std::string_view name) {
  for (int op = 0; op < static_cast<int>(std::size(kOpNames)); ++op) {
    if (kOpNames[op] == name) return static_cast<Op>(op);
  }
  return std::nullopt;
}
enum class UploadKind { kModule, kTensor, kBytes, kFile, kLibrary };
enum class ReturnKind { kValue, kFile, kFolder };

// Where the blob cache keeps bytes for an upload kind (§3.2): file uploads
// use the disk tier, every other blob kind the memory tier.
enum class BlobTier { kDisk, kMemory };

struct Instruction {
  Op op = Op::kUpload;
  std::string id;   // upload / get_function / run; empty for return
  std::string key;  // return only

  // upload
  UploadKind upload_kind = UploadKind::kModule;
  std::string source;                   // module
  std::optional<std::string> language;  // module, E2 form: "python" or "cuda"
  std::string blob;                     // tensor / bytes / file / library: sha256 hex
  std::string dtype;                    // tensor
  std::vector<int64_t> shape;           // tensor
  std::string path;                     // file upload: normalized; file/folder return: literal path

  // get_function
  std::string module_ref;
  std::string name;
  bool cpu_only = false;

  // run
  std::string fn_ref;
  nlohmann::json args = nlohmann::json::array();  // as received; top-level refs resolved by worker

  // return
  ReturnKind return_kind = ReturnKind::kValue;
  std::string value_ref;                // value return
  std::optional<std::string> path_ref;  // file/folder return with a {"$ref"} path
};

struct ProgramOptions {
  std::optional<double> timeout_seconds;
  std::optional<int64_t> output_limit_bytes;
  std::optional<int64_t> gpu_count;
  // The GPU architecture the program was built for ("sm_90a"): a cluster sends it to that pool;
  // a server of another architecture refuses it.
  std::optional<std::string> gpu_arch;
};

// A blob referenced by the program, in order of first appearance (§3.2 step 2).
struct BlobReference {
  std::string sha256;
  bool used_by_file = false;    // some file upload uses it -> disk tier
  bool used_by_memory = false;  // some tensor/bytes/library upload uses it -> memory tier
  // Byte length every tensor upload of this blob requires, if any (§2.4).
  std::optional<uint64_t> tensor_bytes;
  std::string tensor_upload_id;  // for the error message
};

struct Program {
  std::vector<Instruction> instructions;
  ProgramOptions options;
  std::vector<BlobReference> blobs;
};

// Parses and validates a program (strict JSON + every rule of §2). Errors are
// kInvalidArgument with a message naming the instruction index and field,
// e.g. "instructions[3].shape: expected an array of non-negative integers".
StatusOr<Program> ParseProgram(std::string_view json_text);

// Item size in bytes of a wire dtype name, or 0 if the name is not one of the
// twelve supported dtypes (§2.4).
int DtypeItemSize(std::string_view dtype);

// Normalizes a relative workspace path by the file-upload rules of §2.4.
StatusOr<std::string> NormalizeWorkspacePath(std::string_view path);

}  // namespace kc::protocol
