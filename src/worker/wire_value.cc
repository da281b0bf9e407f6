#include "worker/wire_value.h"

#include <cmath>

namespace kc::worker {

StatusOr<nlohmann::ordered_json> ToWireValue(const nlohmann::ordered_json& value) {
  using Json = nlohmann::ordered_json;
  switch (value.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      return Json{{"type", "null"}};
    case Json::value_t::boolean:
      return Json{{"type", "boolean"}, {"value", value}};
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return Json{{"type", "integer"}, {"value", value}};
    case Json::value_t::number_float:
      if (!std::isfinite(value.get<double>())) {
        return InvalidArgumentError("a sealed result cannot hold a non-finite number");
      }
      return Json{{"type", "number"}, {"value", value}};
    case Json::value_t::string:
      return Json{{"type", "string"}, {"value", value}};
    case Json::value_t::array: {
      Json items = Json::array();
      for (const Json& item : value) {
        KC_ASSIGN_OR_RETURN(Json node, ToWireValue(item));
        items.push_back(std::move(node));
      }
      return Json{{"type", "array"}, {"value", std::move(items)}};
    }
    case Json::value_t::object: {
      Json members = Json::object();
      for (const auto& [key, item] : value.items()) {
        KC_ASSIGN_OR_RETURN(Json node, ToWireValue(item));
        members[key] = std::move(node);
      }
      return Json{{"type", "object"}, {"value", std::move(members)}};
    }
    case Json::value_t::binary:
      break;
  }
  return InvalidArgumentError("a sealed result cannot hold binary data");
}

}  // namespace kc::worker
