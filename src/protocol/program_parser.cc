// ParseProgram: every validation rule of spec/protocol.md §2 (E3+, plus the
// E2 module `language` field that the seed example needs). Validation runs
// before anything executes; every failure is kInvalidArgument (HTTP 400
// `parse`) naming the instruction index and field.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/sha256.h"
#include "protocol/cuda_code.h"
#include "protocol/program.h"
#include "protocol/strict_json.h"

namespace kc::protocol {
namespace {

using nlohmann::json;

constexpr size_t kMaxPathComponentBytes = 255;
constexpr size_t kMaxPathBytes = 4096;
constexpr int64_t kMaxGpuCount = 8;

struct DtypeInfo {
  std::string_view name;
  int item_size;
};

constexpr DtypeInfo kDtypes[] = {
    {"bool", 1},    {"uint8", 1},    {"int8", 1},          {"int16", 2},
    {"int32", 4},   {"int64", 8},    {"float16", 2},       {"float32", 4},
    {"float64", 8}, {"bfloat16", 2}, {"float8_e4m3fn", 1}, {"float8_e5m2", 1},
};

std::string Quote(std::string_view text) {
  return "'" + std::string(text) + "'";
}

// {"$ref": "<non-empty string>"} and nothing else (§2.3).
bool IsReference(const json& value) {
  if (!value.is_object() || value.size() != 1) return false;
  auto it = value.find("$ref");
  return it != value.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

// Non-negative JSON integer that fits int64_t (bools are not numbers in nlohmann).
bool AsNonNegativeInt(const json& value, int64_t* out) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  return false;
}

// A file's normalized path plus every ancestor directory it implies; catches
// duplicates and file/directory prefix conflicts across file uploads (§2.4).
class WorkspaceLayout {
 public:
  // Empty string on success, else the conflict.
  std::string Add(const std::string& path) {
    if (files_.count(path)) return "duplicate file path " + Quote(path);
    if (directories_.count(path)) {
      return "file path " + Quote(path) + " is a directory of another uploaded file";
    }
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      std::string parent = path.substr(0, slash);
      if (files_.count(parent)) {
        return "file path " + Quote(path) + " is inside uploaded file " + Quote(parent);
      }
    }
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      directories_.insert(path.substr(0, slash));
    }
    files_.insert(path);
    return "";
  }

 private:
  std::unordered_set<std::string> files_;
  std::unordered_set<std::string> directories_;
};

class ProgramParser {
 public:
  StatusOr<Program> Parse(const json& root);

 private:
  Status ParseOptions(const json& options);
  Status ParseInstruction(size_t index, const json& raw);
  Status ParseUpload(const json& raw, Instruction& instruction);
  Status ParseTensorFields(const json& raw, Instruction& instruction, uint64_t* byte_length);
  Status ParseGetFunction(const json& raw, Instruction& instruction);
  Status ParseRun(const json& raw, Instruction& instruction);
  Status ParseReturn(const json& raw, Instruction& instruction);

  Status CheckFields(const json& raw, std::initializer_list<std::string_view> required,
                     std::initializer_list<std::string_view> optional, std::string_view what) const;
  Status ParseId(const json& raw, Instruction& instruction) const;
  StatusOr<std::string> ParseReference(const json& value, std::string_view field) const;
  StatusOr<std::string> ParseNonEmptyString(const json& raw, std::string_view field) const;
  Status CheckKnownHandle(const std::string& name, std::string_view field) const;
  Status NoteBlob(const Instruction& instruction, uint64_t tensor_bytes);

  // "instructions[3].shape: <what>" for the instruction being parsed.
  Status Error(std::string_view field, std::string_view what) const {
    std::string where = "instructions[" + std::to_string(index_) + "]";
    if (!field.empty()) where += "." + std::string(field);
    return InvalidArgumentError(where + ": " + std::string(what));
  }

  Program program_;
  size_t index_ = 0;                     // instruction being parsed
  std::unordered_set<std::string> ids_;  // ids bound by earlier instructions
  std::unordered_set<std::string> return_keys_;
  std::unordered_map<std::string, size_t> blob_positions_;  // hash -> program_.blobs index
  WorkspaceLayout layout_;
};

StatusOr<Program> ProgramParser::Parse(const json& root) {
  if (!root.is_object()) return InvalidArgumentError("program: expected a JSON object");
  for (const auto& [key, value] : root.items()) {
    if (key != "instructions" && key != "options") {
      return InvalidArgumentError("program: unknown key " + Quote(key));
    }
  }
  auto instructions = root.find("instructions");
  if (instructions == root.end()) {
    return InvalidArgumentError("program: missing required key 'instructions'");
  }
  if (!instructions->is_array() || instructions->empty()) {
    return InvalidArgumentError("instructions: expected a non-empty array");
  }
  if (auto options = root.find("options"); options != root.end()) {
    KC_RETURN_IF_ERROR(ParseOptions(*options));
  }
  program_.instructions.reserve(instructions->size());
  for (size_t i = 0; i < instructions->size(); ++i) {
    KC_RETURN_IF_ERROR(ParseInstruction(i, (*instructions)[i]));
  }
  return std::move(program_);
}

Status ProgramParser::ParseOptions(const json& options) {
  if (!options.is_object()) return InvalidArgumentError("options: expected an object");
  for (const auto& [key, value] : options.items()) {
    std::string field = "options." + key;
    if (key == "timeout_seconds") {
      // is_number() is false for bools in nlohmann.
      double seconds = value.is_number() ? value.get<double>() : 0;
      if (!value.is_number() || !std::isfinite(seconds) || seconds <= 0) {
        return InvalidArgumentError(field + ": expected a finite number > 0");
      }
      program_.options.timeout_seconds = seconds;
    } else if (key == "output_limit_bytes") {
      int64_t limit = 0;
      if (!AsNonNegativeInt(value, &limit)) {
        // Unsigned beyond int64 is above every cap, and caps clamp (§2.2).
        if (!value.is_number_unsigned()) {
          return InvalidArgumentError(field + ": expected an integer >= 0");
        }
        limit = std::numeric_limits<int64_t>::max();
      }
      program_.options.output_limit_bytes = limit;
    } else if (key == "gpu_count") {
      int64_t count = 0;
      if (!AsNonNegativeInt(value, &count) || count < 1 || count > kMaxGpuCount) {
        return InvalidArgumentError(field + ": expected an integer from 1 to 8");
      }
      program_.options.gpu_count = count;
    } else if (key == "gpu_arch") {
      if (!value.is_string() || !ArchNumberOf(value.get<std::string>())) {
        return InvalidArgumentError(field + ": expected an architecture such as \"sm_90a\"");
      }
      program_.options.gpu_arch = value.get<std::string>();
    } else {
      return InvalidArgumentError("options: unknown key " + Quote(key));
    }
  }
  return Status::Ok();
}

Status ProgramParser::ParseInstruction(size_t index, const json& raw) {
  index_ = index;
  if (!raw.is_object()) return Error("", "expected an object");
  auto op = raw.find("op");
  if (op == raw.end()) return Error("op", "missing required field");
  if (!op->is_string()) return Error("op", "expected a string");
  const std::string& op_name = op->get_ref<const std::string&>();

  const std::optional<Op> named = OpNamed(op_name);
  if (!named) return Error("op", "unknown op " + Quote(op_name));
  Instruction instruction;
  instruction.op = *named;
  switch (*named) {
    case Op::kUpload:
      KC_RETURN_IF_ERROR(ParseUpload(raw, instruction));
      break;
    case Op::kGetFunction:
      KC_RETURN_IF_ERROR(ParseGetFunction(raw, instruction));
      break;
    case Op::kRun:
      KC_RETURN_IF_ERROR(ParseRun(raw, instruction));
      break;
    case Op::kReturn:
      KC_RETURN_IF_ERROR(ParseReturn(raw, instruction));
      break;
  }
  // Bound only now, so an instruction cannot reference its own id.
  if (!instruction.id.empty()) ids_.insert(instruction.id);
  program_.instructions.push_back(std::move(instruction));
  return Status::Ok();
}

Status ProgramParser::ParseUpload(const json& raw, Instruction& instruction) {
  auto kind = raw.find("kind");
  if (kind == raw.end()) return Error("kind", "missing required field");
  if (!kind->is_string()) return Error("kind", "expected a string");
  const std::string& kind_name = kind->get_ref<const std::string&>();
  std::string what = "upload kind " + Quote(kind_name);
  if (kind_name == "module") {
    instruction.upload_kind = UploadKind::kModule;
    KC_RETURN_IF_ERROR(CheckFields(raw, {"op", "id", "kind", "source"}, {"language"}, what));
  } else if (kind_name == "tensor") {
    instruction.upload_kind = UploadKind::kTensor;
    KC_RETURN_IF_ERROR(CheckFields(raw, {"op", "id", "kind", "blob", "dtype", "shape"}, {}, what));
  } else if (kind_name == "bytes" || kind_name == "library") {
    instruction.upload_kind = kind_name == "bytes" ? UploadKind::kBytes : UploadKind::kLibrary;
    KC_RETURN_IF_ERROR(CheckFields(raw, {"op", "id", "kind", "blob"}, {}, what));
  } else if (kind_name == "file") {
    instruction.upload_kind = UploadKind::kFile;
    KC_RETURN_IF_ERROR(CheckFields(raw, {"op", "id", "kind", "blob", "path"}, {}, what));
  } else {
    return Error("kind", "unknown upload kind " + Quote(kind_name));
  }
  KC_RETURN_IF_ERROR(ParseId(raw, instruction));

  if (instruction.upload_kind == UploadKind::kModule) {
    const json& source = raw["source"];
    if (!source.is_string()) return Error("source", "expected a string");
    instruction.source = source.get<std::string>();
    if (auto language = raw.find("language"); language != raw.end()) {
      if (!language->is_string() || (*language != "python" && *language != "cuda")) {
        return Error("language", "expected \"python\" or \"cuda\"");
      }
      instruction.language = language->get<std::string>();
    }
    return Status::Ok();
  }

  const json& blob = raw["blob"];
  if (!blob.is_string() || !IsSha256Hex(blob.get_ref<const std::string&>())) {
    return Error("blob", "expected 64 lowercase hex characters (a SHA-256 digest)");
  }
  instruction.blob = blob.get<std::string>();

  uint64_t tensor_bytes = 0;
  if (instruction.upload_kind == UploadKind::kTensor) {
    KC_RETURN_IF_ERROR(ParseTensorFields(raw, instruction, &tensor_bytes));
  } else if (instruction.upload_kind == UploadKind::kFile) {
    const json& path = raw["path"];
    if (!path.is_string()) return Error("path", "expected a string");
    StatusOr<std::string> normalized = NormalizeWorkspacePath(path.get_ref<const std::string&>());
    if (!normalized.ok()) return Error("path", normalized.status().message());
    if (std::string conflict = layout_.Add(*normalized); !conflict.empty()) {
      return Error("path", conflict);
    }
    instruction.path = std::move(normalized).value();
  }
  return NoteBlob(instruction, tensor_bytes);
}

Status ProgramParser::ParseTensorFields(const json& raw, Instruction& instruction,
                                        uint64_t* byte_length) {
  const json& dtype = raw["dtype"];
  int item_size = dtype.is_string() ? DtypeItemSize(dtype.get_ref<const std::string&>()) : 0;
  if (item_size == 0) {
    return Error("dtype",
                 "expected one of bool, uint8, int8, int16, int32, int64, float16, float32, "
                 "float64, bfloat16, float8_e4m3fn, float8_e5m2");
  }
  instruction.dtype = dtype.get<std::string>();

  const json& shape = raw["shape"];
  if (!shape.is_array()) return Error("shape", "expected an array of non-negative integers");
  uint64_t elements = 1;
  bool overflow = false;
  for (const json& dim : shape) {
    int64_t size = 0;
    if (!AsNonNegativeInt(dim, &size)) {
      return Error("shape", "expected an array of non-negative integers");
    }
    instruction.shape.push_back(size);
    overflow = overflow || __builtin_mul_overflow(elements, static_cast<uint64_t>(size), &elements);
  }
  overflow =
      overflow || __builtin_mul_overflow(elements, static_cast<uint64_t>(item_size), byte_length);
  // A zero dimension makes the tensor empty however large the others are.
  for (int64_t size : instruction.shape) {
    if (size == 0) {
      *byte_length = 0;
      return Status::Ok();
    }
  }
  if (overflow) return Error("shape", "tensor byte size overflows 64 bits");
  return Status::Ok();
}

Status ProgramParser::ParseGetFunction(const json& raw, Instruction& instruction) {
  KC_RETURN_IF_ERROR(
      CheckFields(raw, {"op", "id", "module", "name"}, {"cpu_only"}, "op 'get_function'"));
  KC_RETURN_IF_ERROR(ParseId(raw, instruction));
  KC_ASSIGN_OR_RETURN(instruction.module_ref, ParseReference(raw["module"], "module"));
  KC_ASSIGN_OR_RETURN(instruction.name, ParseNonEmptyString(raw, "name"));
  if (auto cpu_only = raw.find("cpu_only"); cpu_only != raw.end()) {
    if (!cpu_only->is_boolean()) return Error("cpu_only", "expected a boolean");
    instruction.cpu_only = cpu_only->get<bool>();
  }
  return Status::Ok();
}

Status ProgramParser::ParseRun(const json& raw, Instruction& instruction) {
  KC_RETURN_IF_ERROR(CheckFields(raw, {"op", "id", "fn"}, {"args"}, "op 'run'"));
  KC_RETURN_IF_ERROR(ParseId(raw, instruction));
  KC_ASSIGN_OR_RETURN(instruction.fn_ref, ParseReference(raw["fn"], "fn"));
  auto args = raw.find("args");
  if (args == raw.end()) return Status::Ok();
  if (!args->is_array()) return Error("args", "expected an array");
  // Only top-level reference-shaped elements are references; nested ones and
  // near-misses ({"$ref": ""}, extra keys) are literal data (§2.3).
  for (size_t i = 0; i < args->size(); ++i) {
    const json& arg = (*args)[i];
    if (!IsReference(arg)) continue;
    KC_RETURN_IF_ERROR(
        CheckKnownHandle(arg["$ref"].get<std::string>(), "args[" + std::to_string(i) + "]"));
  }
  instruction.args = *args;
  return Status::Ok();
}

Status ProgramParser::ParseReturn(const json& raw, Instruction& instruction) {
  auto kind = raw.find("kind");
  if (kind == raw.end()) {
    KC_RETURN_IF_ERROR(CheckFields(raw, {"op", "key", "value"}, {}, "a value return"));
  } else {
    if (!kind->is_string() || (*kind != "file" && *kind != "folder")) {
      return Error("kind", "expected \"file\" or \"folder\"");
    }
    KC_RETURN_IF_ERROR(CheckFields(raw, {"op", "key", "kind", "path"}, {}, "a file/folder return"));
  }
  KC_ASSIGN_OR_RETURN(instruction.key, ParseNonEmptyString(raw, "key"));
  if (!return_keys_.insert(instruction.key).second) {
    return Error("key", "duplicate return key " + Quote(instruction.key));
  }
  if (kind == raw.end()) {
    instruction.return_kind = ReturnKind::kValue;
    KC_ASSIGN_OR_RETURN(instruction.value_ref, ParseReference(raw["value"], "value"));
    return Status::Ok();
  }
  instruction.return_kind = *kind == "file" ? ReturnKind::kFile : ReturnKind::kFolder;
  const json& path = raw["path"];
  if (path.is_string()) {
    StatusOr<std::string> normalized = NormalizeWorkspacePath(path.get_ref<const std::string&>());
    if (!normalized.ok()) return Error("path", normalized.status().message());
    instruction.path = std::move(normalized).value();
    return Status::Ok();
  }
  if (!IsReference(path)) {
    return Error("path", "expected a path string or a reference {\"$ref\": \"<id>\"}");
  }
  KC_ASSIGN_OR_RETURN(instruction.path_ref, ParseReference(path, "path"));
  return Status::Ok();
}

Status ProgramParser::CheckFields(const json& raw, std::initializer_list<std::string_view> required,
                                  std::initializer_list<std::string_view> optional,
                                  std::string_view what) const {
  auto listed = [](std::initializer_list<std::string_view> names, std::string_view key) {
    for (std::string_view name : names) {
      if (name == key) return true;
    }
    return false;
  };
  for (const auto& [key, value] : raw.items()) {
    if (!listed(required, key) && !listed(optional, key)) {
      return Error(key, "unknown field for " + std::string(what));
    }
  }
  for (std::string_view name : required) {
    if (!raw.contains(name)) return Error(name, "missing required field");
  }
  return Status::Ok();
}

Status ProgramParser::ParseId(const json& raw, Instruction& instruction) const {
  KC_ASSIGN_OR_RETURN(instruction.id, ParseNonEmptyString(raw, "id"));
  if (ids_.count(instruction.id)) return Error("id", "duplicate id " + Quote(instruction.id));
  return Status::Ok();
}

StatusOr<std::string> ProgramParser::ParseReference(const json& value,
                                                    std::string_view field) const {
  if (!IsReference(value)) {
    return Error(field, "expected a reference {\"$ref\": \"<id>\"} with a non-empty id");
  }
  std::string name = value["$ref"].get<std::string>();
  KC_RETURN_IF_ERROR(CheckKnownHandle(name, field));
  return name;
}

StatusOr<std::string> ProgramParser::ParseNonEmptyString(const json& raw,
                                                         std::string_view field) const {
  const json& value = raw[std::string(field)];
  if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
    return Error(field, "expected a non-empty string");
  }
  return value.get<std::string>();
}

Status ProgramParser::CheckKnownHandle(const std::string& name, std::string_view field) const {
  if (ids_.count(name)) return Status::Ok();
  return Error(field, "references unknown/forward handle " + Quote(name));
}

Status ProgramParser::NoteBlob(const Instruction& instruction, uint64_t tensor_bytes) {
  auto [position, inserted] = blob_positions_.try_emplace(instruction.blob, program_.blobs.size());
  if (inserted) {
    BlobReference reference;
    reference.sha256 = instruction.blob;
    program_.blobs.push_back(std::move(reference));
  }
  BlobReference& blob = program_.blobs[position->second];
  if (instruction.upload_kind == UploadKind::kFile) {
    blob.used_by_file = true;
  } else {
    blob.used_by_memory = true;
  }
  if (instruction.upload_kind != UploadKind::kTensor) return Status::Ok();
  if (blob.tensor_bytes.has_value() && *blob.tensor_bytes != tensor_bytes) {
    return Error("shape", "tensor upload " + Quote(instruction.id) + " expects " +
                              std::to_string(tensor_bytes) + " bytes but tensor upload " +
                              Quote(blob.tensor_upload_id) + " of the same blob expects " +
                              std::to_string(*blob.tensor_bytes));
  }
  if (!blob.tensor_bytes.has_value()) {
    blob.tensor_bytes = tensor_bytes;
    blob.tensor_upload_id = instruction.id;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Program> ParseProgram(std::string_view json_text) {
  StatusOr<json> root = ParseStrictJson(json_text);
  if (!root.ok()) return root.status().WithContext("program");
  return ProgramParser().Parse(*root);
}

int DtypeItemSize(std::string_view dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.name == dtype) return info.item_size;
  }
  return 0;
}

StatusOr<std::string> NormalizeWorkspacePath(std::string_view path) {
  if (path.empty()) return InvalidArgumentError("path must not be empty");
  if (path.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("path must not contain NUL");
  }
  if (path.find('\\') != std::string_view::npos) {
    return InvalidArgumentError("path must not contain a backslash");
  }
  if (path.front() == '/') return InvalidArgumentError("path must be relative");
  std::string normalized;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view component = path.substr(start, end - start);
    start = end + 1;
    // Checked on the raw path, before dropping anything: "a/../b" is refused (§2.4).
    if (component == "..") return InvalidArgumentError("path must not contain '..'");
    if (component.empty() || component == ".") continue;
    if (component.size() > kMaxPathComponentBytes) {
      return InvalidArgumentError("path component longer than 255 bytes");
    }
    if (!normalized.empty()) normalized += '/';
    normalized += component;
  }
  if (normalized.empty()) return InvalidArgumentError("path is empty after normalization");
  if (normalized.size() > kMaxPathBytes) {
    return InvalidArgumentError("path longer than 4096 bytes");
  }
  return normalized;
}

}  // namespace kc::protocol
