// Fuzzes ParseStrictJson (spec/protocol.md §2.1). Invariants: failures are
// kInvalidArgument; anything accepted is also accepted, with the same value, by
// nlohmann's permissive parser, and its dump parses strictly back to itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "protocol/strict_json.h"
#include "protocol/strict_ordered_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text = kc::fuzz::AsText(data, size);
  kc::StatusOr<nlohmann::json> parsed = kc::protocol::ParseStrictJson(text);
  kc::StatusOr<nlohmann::ordered_json> ordered = kc::protocol::ParseStrictOrderedJson(text);
  KC_FUZZ_CHECK(parsed.ok() == ordered.ok());
  if (!parsed.ok()) {
    KC_FUZZ_CHECK(parsed.status().code() == kc::StatusCode::kInvalidArgument);
    KC_FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  // Strict is a subset of permissive: same document, no discarded value.
  nlohmann::json permissive = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  KC_FUZZ_CHECK(!permissive.is_discarded());
  KC_FUZZ_CHECK(permissive == *parsed);
  // What we accepted dumps to valid strict JSON that reads back identically.
  std::string dumped = parsed->dump();
  kc::StatusOr<nlohmann::json> again = kc::protocol::ParseStrictJson(dumped);
  KC_FUZZ_CHECK(again.ok());
  KC_FUZZ_CHECK(*again == *parsed);
  // The ordered parse holds the same document.
  KC_FUZZ_CHECK(nlohmann::json::parse(ordered->dump()) == *parsed);
  return 0;
}
