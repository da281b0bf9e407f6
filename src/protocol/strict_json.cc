#include "protocol/strict_json.h"

#include <utility>

#include "protocol/json_reader.h"

namespace kc::protocol {

namespace {

// Depth is bounded by the reader's max_depth, so recursion is safe.
nlohmann::json ToNlohmann(JsonValue&& value) {
  switch (value.type()) {
    case JsonValue::Type::kNull:
      return nullptr;
    case JsonValue::Type::kBoolean:
      return value.boolean();
    case JsonValue::Type::kNumber:
      if (std::optional<int64_t> i = value.AsInt64()) return *i;
      if (std::optional<uint64_t> u = value.AsUint64()) return *u;
      return *value.AsDouble();  // a float, or an integer beyond 64 bits
    case JsonValue::Type::kString:
      return std::move(value.string());
    case JsonValue::Type::kArray: {
      nlohmann::json array = nlohmann::json::array();
      for (JsonValue& item : value.array())
        array.push_back(ToNlohmann(std::move(item)));
      return array;
    }
    case JsonValue::Type::kObject: {
      nlohmann::json object = nlohmann::json::object();
      for (JsonMember& member : value.object())
        object.emplace(std::move(member.key), ToNlohmann(std::move(member.value)));
      return object;
    }
  }
  return nullptr;
}

}  // namespace

StatusOr<nlohmann::json> ParseStrictJson(std::string_view text) {
  KC_ASSIGN_OR_RETURN(JsonValue value, ReadJson(text));
  return ToNlohmann(std::move(value));
}

}  // namespace kc::protocol
