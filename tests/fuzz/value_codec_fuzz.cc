// Fuzzes FinalizeResults / HasBinaryParts (spec/protocol.md §4.2-§4.3).
//
// Input: byte 0 gives the segment count (its low two bits, 0-3); the next
// `count` bytes give each segment's length (0-255, cut from a fixed buffer);
// the rest is JSON, parsed by nlohmann without exceptions. Invariants on
// success: HasBinaryParts is true exactly when segments were given, and the
// binary nodes, walked in order, are "return:0", "return:1", ... each with the
// SHA-256 of its segment (and, for files, its size). Failures are kInternal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "fuzz_check.h"
#include "protocol/value_codec.h"

namespace {

using nlohmann::ordered_json;

struct Walk {
  const std::vector<std::string_view>& segments;
  size_t next = 0;

  void CheckBinary(const ordered_json& node) {
    KC_FUZZ_CHECK(next < segments.size());
    KC_FUZZ_CHECK(node.contains("part") && node["part"] == "return:" + std::to_string(next));
    KC_FUZZ_CHECK(node.contains("sha256") && node["sha256"] == kc::Sha256Hex(segments[next]));
    if (node["type"] == "file") {
      KC_FUZZ_CHECK(node.contains("size") && node["size"] == segments[next].size());
    } else {
      KC_FUZZ_CHECK(!node.contains("size"));
    }
    ++next;
  }

  void Node(const ordered_json& node) {
    KC_FUZZ_CHECK(node.is_object() && node.contains("type") && node["type"].is_string());
    const std::string& type = node["type"].get_ref<const std::string&>();
    if (type == "bytes" || type == "file" || type == "tensor") {
      CheckBinary(node);
    } else if (type == "folder") {
      for (const auto& [path, file] : node["files"].items())
        CheckBinary(file);
    } else if (type == "array" || type == "object") {
      for (const ordered_json& child : node["value"])
        Node(child);
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t count = data[0] & 3;
  if (size < 1 + count) return 0;
  static const std::string filler = [] {
    std::string bytes(256, '\0');
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>(i * 31 + 7);
    return bytes;
  }();
  std::vector<std::string_view> segments;
  for (size_t i = 0; i < count; ++i) {
    segments.push_back(std::string_view(filler).substr(i, data[1 + i]));
  }
  std::string_view text = kc::fuzz::AsText(data + 1 + count, size - 1 - count);
  ordered_json results = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (results.is_discarded() || !results.is_object()) return 0;

  kc::Status status = kc::protocol::FinalizeResults(results, segments);
  if (!status.ok()) {
    KC_FUZZ_CHECK(status.code() == kc::StatusCode::kInternal);
    return 0;
  }
  KC_FUZZ_CHECK(kc::protocol::HasBinaryParts(results) == !segments.empty());
  Walk walk{segments};
  for (const auto& [key, node] : results.items())
    walk.Node(node);
  KC_FUZZ_CHECK(walk.next == segments.size());
  // The finalized document is what the server dumps into the reply.
  (void)results.dump();
  return 0;
}
