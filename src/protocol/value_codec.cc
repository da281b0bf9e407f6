#include "protocol/value_codec.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <unordered_set>
#include <utility>

#include "base/sha256.h"
#include "protocol/program.h"

namespace kc::protocol {
namespace {

using nlohmann::ordered_json;

// Python's own encoder stops near its recursion limit; anything deeper is a
// misbehaving worker, refused before it can exhaust our stack.
constexpr int kMaxDepth = 1000;

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
      text += "[" +
              ordered_json(*key).dump(-1, ' ', false, ordered_json::error_handler_t::replace) + "]";
    } else {
      text += "[" + std::to_string(index) + "]";
    }
    return text;
  }
};

bool IsNonNegativeInteger(const ordered_json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
}

class Finalizer {
 public:
  explicit Finalizer(const std::vector<std::string_view>& segments) : segments_(segments) {}

  Status Node(ordered_json& node, const NodePath& path, int depth);
  Status CheckAllPartsUsed() const;

 private:
  Status Container(ordered_json& node, const NodePath& path, int depth);
  Status Tensor(ordered_json& node, const NodePath& path);
  Status Folder(ordered_json& node, const NodePath& path);
  StatusOr<ordered_json> FileNode(ordered_json& node, const NodePath& path);
  StatusOr<std::string_view> TakePart(const ordered_json& node, const NodePath& path);
  Status ExpectKeys(const ordered_json& node, std::initializer_list<std::string_view> keys,
                    const NodePath& path) const;

  // Wire form of a binary node's part reference and digest.
  void AddPartFields(ordered_json& out, std::string_view bytes) const {
    out["part"] = "return:" + std::to_string(next_part_ - 1);
    out["sha256"] = Sha256Hex(bytes);
  }

  static Status Error(const NodePath& path, std::string_view what) {
    return InternalError("worker result " + path.Render() + ": " + std::string(what));
  }

  const std::vector<std::string_view>& segments_;
  size_t next_part_ = 0;  // the part index the next binary node must carry
};

Status Finalizer::Node(ordered_json& node, const NodePath& path, int depth) {
  if (depth > kMaxDepth) return Error(path, "value nested too deeply");
  if (!node.is_object()) return Error(path, "expected a value node object");
  auto type_it = node.find("type");
  if (type_it == node.end() || !type_it->is_string()) {
    return Error(path, "expected a string \"type\"");
  }
  std::string type = type_it->get<std::string>();
  if (type == "null") return ExpectKeys(node, {"type"}, path);
  if (type == "array" || type == "object") return Container(node, path, depth);
  if (type == "tensor") return Tensor(node, path);
  if (type == "folder") return Folder(node, path);
  if (type == "bytes" || type == "file") {
    KC_ASSIGN_OR_RETURN(ordered_json out, FileNode(node, path));
    if (type == "bytes") out.erase("size");  // bytes nodes carry no size (§4.2)
    node = std::move(out);
    return Status::Ok();
  }
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "value"}, path));
  const ordered_json& value = node["value"];
  bool valid = false;
  if (type == "boolean") {
    valid = value.is_boolean();
  } else if (type == "integer") {
    valid = value.is_number_integer();  // false for bools and floats
  } else if (type == "number") {
    valid = value.is_number() && std::isfinite(value.get<double>());
  } else if (type == "string") {
    valid = value.is_string();
  } else {
    return Error(path, "unknown node type \"" + type + "\"");
  }
  if (!valid) return Error(path, "invalid value for a node of type \"" + type + "\"");
  return Status::Ok();
}

Status Finalizer::Container(ordered_json& node, const NodePath& path, int depth) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "value"}, path));
  ordered_json& value = node["value"];
  if (node["type"] == "array") {
    if (!value.is_array()) return Error(path, "array node needs an array value");
    for (size_t i = 0; i < value.size(); ++i) {
      KC_RETURN_IF_ERROR(Node(value[i], NodePath{&path, "value", nullptr, i}, depth + 1));
    }
    return Status::Ok();
  }
  if (!value.is_object()) return Error(path, "object node needs an object value");
  for (auto& [key, child] : value.items()) {
    KC_RETURN_IF_ERROR(Node(child, NodePath{&path, "value", &key}, depth + 1));
  }
  return Status::Ok();
}

Status Finalizer::Tensor(ordered_json& node, const NodePath& path) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "dtype", "shape", "part"}, path));
  const ordered_json& dtype = node["dtype"];
  int item_size = dtype.is_string() ? DtypeItemSize(dtype.get_ref<const std::string&>()) : 0;
  if (item_size == 0) return Error(path, "unsupported tensor dtype");
  const ordered_json& shape = node["shape"];
  if (!shape.is_array()) return Error(path, "tensor shape must be an array");
  bool empty = false;
  for (const ordered_json& dim : shape) {
    if (!IsNonNegativeInteger(dim)) return Error(path, "tensor shape must be non-negative ints");
    empty = empty || dim.get<uint64_t>() == 0;
  }
  uint64_t expected = empty ? 0 : static_cast<uint64_t>(item_size);
  bool overflow = false;
  for (const ordered_json& dim : shape) {
    overflow = overflow || __builtin_mul_overflow(expected, dim.get<uint64_t>(), &expected);
  }
  KC_ASSIGN_OR_RETURN(std::string_view bytes, TakePart(node, path));
  if (overflow || expected != bytes.size()) {
    return Error(path, "tensor part holds " + std::to_string(bytes.size()) +
                           " bytes, which does not match its dtype and shape");
  }
  ordered_json out = ordered_json::object();
  out["type"] = "tensor";
  out["dtype"] = node["dtype"];
  out["shape"] = std::move(node["shape"]);
  AddPartFields(out, bytes);
  node = std::move(out);
  return Status::Ok();
}

// Builds {"type","size","part","sha256"} from a raw {"type":"file","part":i}
// or {"type":"bytes","part":i} node; the caller sets the type.
StatusOr<ordered_json> Finalizer::FileNode(ordered_json& node, const NodePath& path) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "part"}, path));
  KC_ASSIGN_OR_RETURN(std::string_view bytes, TakePart(node, path));
  ordered_json out = ordered_json::object();
  out["type"] = node["type"];
  out["size"] = static_cast<uint64_t>(bytes.size());
  AddPartFields(out, bytes);
  return out;
}

// Folder manifests must satisfy the client's validate_manifest (§4.2):
// canonical relative paths, sorted without duplicates, every ancestor of a
// file or directory listed as a directory, and no path both file and directory.
Status Finalizer::Folder(ordered_json& node, const NodePath& path) {
  KC_RETURN_IF_ERROR(ExpectKeys(node, {"type", "files", "directories"}, path));
  ordered_json& files = node["files"];
  ordered_json& directories = node["directories"];
  if (!files.is_object()) return Error(path, "folder files must be an object");
  if (!directories.is_array()) return Error(path, "folder directories must be an array");

  auto canonical = [](const std::string& p) {
    StatusOr<std::string> normalized = NormalizeWorkspacePath(p);
    return normalized.ok() && *normalized == p;
  };
  std::unordered_set<std::string> directory_set;
  const std::string* previous = nullptr;
  for (const ordered_json& entry : directories) {
    if (!entry.is_string() || !canonical(entry.get_ref<const std::string&>())) {
      return Error(path, "folder directories must be canonical relative paths");
    }
    const std::string& directory = entry.get_ref<const std::string&>();
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
  for (auto& [file_path, file_node] : files.items()) {
    NodePath file_at{&path, "files", &file_path};
    if (!canonical(file_path)) return Error(file_at, "not a canonical relative path");
    if (previous && !(*previous < file_path)) {
      return Error(file_at, "folder files must be sorted without duplicates");
    }
    previous = &file_path;
    if (directory_set.count(file_path)) return Error(file_at, "listed as file and directory");
    if (!ancestors_listed(file_path)) return Error(file_at, "parent directory not listed");
    if (!file_node.is_object() || !file_node.contains("type") || file_node["type"] != "file") {
      return Error(file_at, "expected a file node");
    }
    KC_ASSIGN_OR_RETURN(file_node, FileNode(file_node, file_at));
  }
  ordered_json out = ordered_json::object();
  out["type"] = "folder";
  out["files"] = std::move(files);
  out["directories"] = std::move(directories);
  node = std::move(out);
  return Status::Ok();
}

// Binary nodes must number their parts 0, 1, 2, ... in walk order (§4.3).
StatusOr<std::string_view> Finalizer::TakePart(const ordered_json& node, const NodePath& path) {
  const ordered_json& part = node["part"];
  if (!IsNonNegativeInteger(part)) return Error(path, "part must be a non-negative integer");
  uint64_t index = part.get<uint64_t>();
  if (index != next_part_) {
    return Error(path, "part " + std::to_string(index) + " out of order (expected " +
                           std::to_string(next_part_) + ")");
  }
  if (index >= segments_.size()) {
    return Error(path, "part " + std::to_string(index) + " has no binary segment");
  }
  ++next_part_;
  return segments_[index];
}

Status Finalizer::ExpectKeys(const ordered_json& node, std::initializer_list<std::string_view> keys,
                             const NodePath& path) const {
  for (std::string_view key : keys) {
    if (!node.contains(key)) return Error(path, "missing key \"" + std::string(key) + "\"");
  }
  if (node.size() != keys.size()) return Error(path, "unexpected extra keys");
  return Status::Ok();
}

Status Finalizer::CheckAllPartsUsed() const {
  if (next_part_ == segments_.size()) return Status::Ok();
  return InternalError("worker result: " + std::to_string(segments_.size()) +
                       " binary segments sent but " + std::to_string(next_part_) + " referenced");
}

bool NodeHasBinaryParts(const ordered_json& node) {
  if (!node.is_object()) return false;
  auto type = node.find("type");
  if (type == node.end() || !type->is_string()) return false;
  if (*type == "bytes" || *type == "tensor" || *type == "file") return true;
  if (*type == "folder") {
    auto files = node.find("files");
    return files != node.end() && files->is_object() && !files->empty();
  }
  if (*type != "array" && *type != "object") return false;
  auto value = node.find("value");
  if (value == node.end() || !value->is_structured()) return false;
  for (const ordered_json& child : *value) {
    if (NodeHasBinaryParts(child)) return true;
  }
  return false;
}

}  // namespace

Status FinalizeResults(nlohmann::ordered_json& results,
                       const std::vector<std::string_view>& segments) {
  if (!results.is_object()) return InternalError("worker result: results must be an object");
  Finalizer finalizer(segments);
  for (auto& [key, node] : results.items()) {
    KC_RETURN_IF_ERROR(finalizer.Node(node, NodePath{nullptr, "", &key}, 1));
  }
  return finalizer.CheckAllPartsUsed();
}

bool HasBinaryParts(const nlohmann::ordered_json& results) {
  if (!results.is_object()) return false;
  for (const auto& [key, node] : results.items()) {
    if (NodeHasBinaryParts(node)) return true;
  }
  return false;
}

}  // namespace kc::protocol
