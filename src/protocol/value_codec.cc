#include "protocol/value_codec.h"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include "base/sha256.h"
#include "protocol/json_writer.h"
#include "protocol/program.h"

namespace kc::protocol {
namespace {

// Where a node sits, rendered only when reporting an error, so that the walk
// over a large value builds no strings.
struct NodePath {
  const NodePath* parent = nullptr;
  std::string_view member;  // "value" or "files"; empty for a results key
  const std::string* key = nullptr;
  size_t index = 0;  // used when key is null

  std::string Render() const {
    std::string text = parent ? parent->Render() : "results";
    if (!member.empty()) text += "." + std::string(member);
    if (key) {
      text += "[" + WriteJson(JsonValue::String(*key)) + "]";
    } else {
      text += "[" + std::to_string(index) + "]";
    }
    return text;
  }
};

class Finalizer {
 public:
  explicit Finalizer(const std::vector<std::string_view>& segments) : segments_(segments) {}

  Status Node(JsonValue& node, const NodePath& path, int depth);
  Status CheckAllPartsUsed() const;

 private:
  Status Scalar(const JsonValue& node, const std::string& type, const NodePath& path);
  Status Container(JsonValue& node, const std::string& type, const NodePath& path, int depth);
  Status Tensor(JsonValue& node, const NodePath& path);
  Status Folder(JsonValue& node, const NodePath& path);
  StatusOr<JsonValue> FileNode(const JsonValue& node, const std::string& type,
                               const NodePath& path);
  StatusOr<std::string_view> TakePart(const JsonValue& node, const NodePath& path);
  Status ExpectKeys(const JsonValue& node, std::initializer_list<std::string_view> keys,
                    const NodePath& path) const;

  // Wire form of a binary node's part reference and digest (§4.3).
  void AddPartFields(JsonValue& out, std::string_view bytes) const {
    out.Add("part", JsonValue::String("return:" + std::to_string(next_part_ - 1)));
    out.Add("sha256", JsonValue::String(Sha256Hex(bytes)));
  }

  static Status Error(const NodePath& path, std::string_view what) {
    return InternalError("worker result " + path.Render() + ": " + std::string(what));
  }

  const std::vector<std::string_view>& segments_;
  size_t next_part_ = 0;  // the part index the next binary node must carry
};

Status Finalizer::Node(JsonValue& node, const NodePath& path, int depth) {
  if (depth > kMaxValueDepth) return Error(path, "value nested too deeply");
  if (!node.is_object()) return Error(path, "expected a value node object");
  const JsonValue* type_field = node.Find("type");
  if (type_field == nullptr || !type_field->is_string()) {
    return Error(path, "expected a string \"type\"");
  }
  const std::string type = type_field->string();
  if (type == "null") return ExpectKeys(node, {"type"}, path);
  if (type == "array" || type == "object") return Container(node, type, path, depth);
  if (type == "tensor") return Tensor(node, path);
  if (type == "folder") return Folder(node, path);
  if (type == "bytes" || type == "file") {
    KC_ASSIGN_OR_RETURN(node, FileNode(node, type, path));
    return Status::Ok();
  }
  return Scalar(node, type, path);
}

Status Finalizer::Scalar(const JsonValue& node, const std::string& type, const NodePath& path) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "value"}, path));
  const JsonValue& value = *node.Find("value");
  bool valid = false;
  if (type == "boolean") {
    valid = value.is_boolean();
  } else if (type == "integer") {
    valid = value.is_integer();  // any number of digits (§4.2)
  } else if (type == "number") {
    valid = value.is_number();  // the reader refused non-finite ones
  } else if (type == "string") {
    valid = value.is_string();
  } else {
    return Error(path, "unknown node type \"" + type + "\"");
  }
  if (!valid) return Error(path, "invalid value for a node of type \"" + type + "\"");
  return Status::Ok();
}

Status Finalizer::Container(JsonValue& node, const std::string& type, const NodePath& path,
                            int depth) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "value"}, path));
  JsonValue& value = *node.Find("value");
  if (type == "array") {
    if (!value.is_array()) return Error(path, "array node needs an array value");
    JsonArray& items = value.array();
    for (size_t i = 0; i < items.size(); ++i) {
      KC_RETURN_IF_ERROR(Node(items[i], NodePath{&path, "value", nullptr, i}, depth + 1));
    }
    return Status::Ok();
  }
  if (!value.is_object()) return Error(path, "object node needs an object value");
  for (JsonMember& member : value.object()) {
    KC_RETURN_IF_ERROR(Node(member.value, NodePath{&path, "value", &member.key}, depth + 1));
  }
  return Status::Ok();
}

Status Finalizer::Tensor(JsonValue& node, const NodePath& path) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "dtype", "shape", "part"}, path));
  JsonValue& dtype = *node.Find("dtype");
  int item_size = dtype.is_string() ? DtypeItemSize(dtype.string()) : 0;
  if (item_size == 0) return Error(path, "unsupported tensor dtype");
  JsonValue& shape = *node.Find("shape");
  if (!shape.is_array()) return Error(path, "tensor shape must be an array");
  std::vector<uint64_t> dims;
  for (const JsonValue& dim : shape.array()) {
    std::optional<uint64_t> size = dim.AsUint64();
    if (!size) return Error(path, "tensor shape must be non-negative ints");
    dims.push_back(*size);
  }
  bool empty = false;
  for (uint64_t dim : dims)
    empty = empty || dim == 0;
  uint64_t expected = empty ? 0 : static_cast<uint64_t>(item_size);
  bool overflow = false;
  for (uint64_t dim : dims)
    overflow = overflow || __builtin_mul_overflow(expected, dim, &expected);
  KC_ASSIGN_OR_RETURN(std::string_view bytes, TakePart(node, path));
  if (overflow || expected != bytes.size()) {
    return Error(path, "tensor part holds " + std::to_string(bytes.size()) +
                           " bytes, which does not match its dtype and shape");
  }
  JsonValue out = JsonValue::Object();
  out.Add("type", JsonValue::String("tensor"));
  out.Add("dtype", std::move(dtype));
  out.Add("shape", std::move(shape));
  AddPartFields(out, bytes);
  node = std::move(out);
  return Status::Ok();
}

// Builds the wire form of a raw {"type":"file"|"bytes","part":i} node:
// {"type","size","part","sha256"} for files, no size for bytes (§4.2).
StatusOr<JsonValue> Finalizer::FileNode(const JsonValue& node, const std::string& type,
                                        const NodePath& path) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "part"}, path));
  KC_ASSIGN_OR_RETURN(std::string_view bytes, TakePart(node, path));
  JsonValue out = JsonValue::Object();
  out.Add("type", JsonValue::String(type));
  if (type == "file") out.Add("size", JsonValue::Unsigned(bytes.size()));
  AddPartFields(out, bytes);
  return out;
}

// Folder manifests must satisfy the client's validate_manifest (§4.2):
// canonical relative paths, sorted without duplicates, every ancestor of a
// file or directory listed as a directory, and no path both file and directory.
Status Finalizer::Folder(JsonValue& node, const NodePath& path) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "files", "directories"}, path));
  JsonValue& files = *node.Find("files");
  JsonValue& directories = *node.Find("directories");
  if (!files.is_object()) return Error(path, "folder files must be an object");
  if (!directories.is_array()) return Error(path, "folder directories must be an array");

  auto canonical = [](const std::string& p) {
    StatusOr<std::string> normalized = NormalizeWorkspacePath(p);
    return normalized.ok() && *normalized == p;
  };
  std::unordered_set<std::string> directory_set;
  const std::string* previous = nullptr;
  for (const JsonValue& entry : directories.array()) {
    if (!entry.is_string() || !canonical(entry.string())) {
      return Error(path, "folder directories must be canonical relative paths");
    }
    const std::string& directory = entry.string();
    if (previous && !(*previous < directory)) {
      return Error(path, "folder directories must be sorted without duplicates");
    }
    previous = &directory;
    directory_set.insert(directory);
  }
  auto ancestors_listed = [&](const std::string& p) {
    for (size_t slash = p.find('/'); slash != std::string::npos; slash = p.find('/', slash + 1)) {
      if (!directory_set.count(p.substr(0, slash))) return false;
    }
    return true;
  };
  for (const std::string& directory : directory_set) {
    if (!ancestors_listed(directory)) {
      return Error(path, "folder directories miss an ancestor of " + directory);
    }
  }
  previous = nullptr;
  for (JsonMember& file : files.object()) {
    const std::string& file_path = file.key;
    NodePath file_at{&path, "files", &file_path};
    if (!canonical(file_path)) return Error(file_at, "not a canonical relative path");
    if (previous && !(*previous < file_path)) {
      return Error(file_at, "folder files must be sorted without duplicates");
    }
    previous = &file_path;
    if (directory_set.count(file_path)) return Error(file_at, "listed as file and directory");
    if (!ancestors_listed(file_path)) return Error(file_at, "parent directory not listed");
    const JsonValue* file_type = file.value.Find("type");
    if (file_type == nullptr || !file_type->IsString("file")) {
      return Error(file_at, "expected a file node");
    }
    KC_ASSIGN_OR_RETURN(file.value, FileNode(file.value, "file", file_at));
  }
  JsonValue out = JsonValue::Object();
  out.Add("type", JsonValue::String("folder"));
  out.Add("files", std::move(files));
  out.Add("directories", std::move(directories));
  node = std::move(out);
  return Status::Ok();
}

// Binary nodes must number their parts 0, 1, 2, ... in walk order (§4.3).
StatusOr<std::string_view> Finalizer::TakePart(const JsonValue& node, const NodePath& path) {
  std::optional<uint64_t> index = node.Find("part")->AsUint64();
  if (!index) return Error(path, "part must be a non-negative integer");
  if (*index != next_part_) {
    return Error(path, "part " + std::to_string(*index) + " out of order (expected " +
                           std::to_string(next_part_) + ")");
  }
  if (*index >= segments_.size()) {
    return Error(path, "part " + std::to_string(*index) + " has no binary segment");
  }
  ++next_part_;
  return segments_[*index];
}

Status Finalizer::ExpectKeys(const JsonValue& node, std::initializer_list<std::string_view> keys,
                             const NodePath& path) const {
  for (std::string_view key : keys) {
    if (node.Find(key) == nullptr) {
      return Error(path, "missing key \"" + std::string(key) + "\"");
    }
  }
  if (node.size() != keys.size()) return Error(path, "unexpected extra keys");
  return Status::Ok();
}

Status Finalizer::CheckAllPartsUsed() const {
  if (next_part_ == segments_.size()) return Status::Ok();
  return InternalError("worker result: " + std::to_string(segments_.size()) +
                       " binary segments sent but " + std::to_string(next_part_) + " referenced");
}

}  // namespace

Status FinalizeResults(JsonValue& results, const std::vector<std::string_view>& segments) {
  if (!results.is_object()) return InternalError("worker result: results must be an object");
  Finalizer finalizer(segments);
  for (JsonMember& member : results.object()) {
    KC_RETURN_IF_ERROR(finalizer.Node(member.value, NodePath{nullptr, "", &member.key}, 1));
  }
  return finalizer.CheckAllPartsUsed();
}

}  // namespace kc::protocol
