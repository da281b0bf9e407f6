// Fuzzes the strict JSON reader (json_reader.h) and its nlohmann adapter
// ParseStrictJson (spec/protocol.md §2.1). Invariants: failures are
// kInvalidArgument with a message, in both; what is accepted is written
// (json_writer.h) to text that reads back to the same value, and that text is
// a fixed point; and where nlohmann's permissive parser also accepts the
// input, it holds the same document as ParseStrictJson.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "protocol/json_reader.h"
#include "protocol/json_writer.h"
#include "protocol/strict_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = kc::fuzz::AsText(data, size);
  kc::StatusOr<kc::protocol::JsonValue> value = kc::protocol::ReadJson(text);
  kc::StatusOr<nlohmann::json> parsed = kc::protocol::ParseStrictJson(text);
  KC_FUZZ_CHECK(value.ok() == parsed.ok());
  if (!value.ok()) {
    KC_FUZZ_CHECK(value.status().code() == kc::StatusCode::kInvalidArgument);
    KC_FUZZ_CHECK(!value.status().message().empty());
    KC_FUZZ_CHECK(parsed.status().code() == kc::StatusCode::kInvalidArgument);
    return 0;
  }
  std::string written = kc::protocol::WriteJson(*value);
  kc::StatusOr<kc::protocol::JsonValue> again = kc::protocol::ReadJson(written);
  KC_FUZZ_CHECK(again.ok());
  KC_FUZZ_CHECK(*again == *value);
  KC_FUZZ_CHECK(kc::protocol::WriteJson(*again) == written);
  // Lone surrogates are beyond nlohmann; where it reads the input, it agrees.
  nlohmann::json permissive = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!permissive.is_discarded()) KC_FUZZ_CHECK(permissive == *parsed);
  return 0;
}
