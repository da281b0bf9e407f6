// Fuzzes FinalizeResults (spec/protocol.md §4.2-§4.3).
//
// Input: byte 0 gives the segment count (its low two bits, 0-3); the next
// `count` bytes give each segment's length (0-255, cut from a fixed buffer);
// the rest is JSON, read as the server reads a worker outcome. Invariants on
// success: the binary nodes, walked in order, are "return:0", "return:1", ...
// each with the SHA-256 of its segment (and, for files, its size), and every
// segment is used. Failures are kInternal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "fuzz_check.h"
#include "protocol/json_reader.h"
#include "protocol/json_writer.h"
#include "protocol/value_codec.h"

namespace {

using kc::protocol::JsonValue;

struct Walk {
  const std::vector<std::string_view>& segments;
  size_t next = 0;

  void CheckBinary(const JsonValue& node) {
    KC_FUZZ_CHECK(next < segments.size());
    const JsonValue* part = node.Find("part");
    const JsonValue* sha256 = node.Find("sha256");
    KC_FUZZ_CHECK(part && part->IsString("return:" + std::to_string(next)));
    KC_FUZZ_CHECK(sha256 && sha256->IsString(kc::Sha256Hex(segments[next])));
    const JsonValue* size = node.Find("size");
    if (node.Find("type")->IsString("file")) {
      KC_FUZZ_CHECK(size && size->AsUint64() == segments[next].size());
    } else {
      KC_FUZZ_CHECK(size == nullptr);
    }
    ++next;
  }

  void Node(const JsonValue& node) {
    const JsonValue* type = node.Find("type");
    KC_FUZZ_CHECK(type && type->is_string());
    const std::string& name = type->string();
    if (name == "bytes" || name == "file" || name == "tensor") {
      CheckBinary(node);
    } else if (name == "folder") {
      for (const auto& file : node.Find("files")->object())
        CheckBinary(file.value);
    } else if (name == "array") {
      for (const JsonValue& child : node.Find("value")->array())
        Node(child);
    } else if (name == "object") {
      for (const auto& member : node.Find("value")->object())
        Node(member.value);
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
  kc::StatusOr<JsonValue> results =
      kc::protocol::ReadJson(text, {.max_depth = kc::protocol::kMaxOutcomeDepth});
  if (!results.ok() || !results->is_object()) return 0;

  kc::Status status = kc::protocol::FinalizeResults(*results, segments);
  if (!status.ok()) {
    KC_FUZZ_CHECK(status.code() == kc::StatusCode::kInternal);
    return 0;
  }
  Walk walk{segments};
  for (const auto& member : results->object())
    walk.Node(member.value);
  KC_FUZZ_CHECK(walk.next == segments.size());
  // The finalized document is what the server writes into the reply.
  KC_FUZZ_CHECK(kc::protocol::ReadJson(kc::protocol::WriteJson(*results),
                                       {.max_depth = kc::protocol::kMaxOutcomeDepth})
                    .ok());
  return 0;
}
