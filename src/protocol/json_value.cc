#include "protocol/json_value.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace kc::protocol {

namespace {

template <typename T>
std::optional<T> ParseInteger(const JsonNumber& number) {
  if (!number.integer) return std::nullopt;
  T value{};
  const char* end = number.text.data() + number.text.size();
  auto [ptr, ec] = std::from_chars(number.text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

JsonValue JsonValue::Integer(int64_t value) {
  return Number({std::to_string(value), /*integer=*/true});
}

JsonValue JsonValue::Unsigned(uint64_t value) {
  return Number({std::to_string(value), /*integer=*/true});
}

JsonValue JsonValue::Double(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  // Shortest form of 3.0 is "3", which reads back as an integer; keep it a float.
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return Number({std::move(text), /*integer=*/false});
}

JsonValue JsonValue::Array() {
  return Array(JsonArray());
}

JsonValue JsonValue::Object() {
  return Object(JsonObject());
}

JsonValue JsonValue::Array(JsonArray items) {
  return JsonValue(Storage(std::in_place_type<JsonArray>, std::move(items)));
}

JsonValue JsonValue::Object(JsonObject members) {
  return JsonValue(Storage(std::in_place_type<JsonObject>, std::move(members)));
}

std::optional<int64_t> JsonValue::AsInt64() const {
  return is_number() ? ParseInteger<int64_t>(number()) : std::nullopt;
}

std::optional<uint64_t> JsonValue::AsUint64() const {
  return is_number() ? ParseInteger<uint64_t>(number()) : std::nullopt;
}

std::optional<double> JsonValue::AsDouble() const {
  if (!is_number()) return std::nullopt;
  const std::string& text = number().text;
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    // from_chars reports overflow and underflow alike; strtod tells them apart
    // (the text is a JSON number, which the "C" locale reads the same way).
    value = std::strtod(text.c_str(), nullptr);
  } else if (ec != std::errc()) {
    return std::nullopt;
  }
  return value;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const JsonMember& member : object()) {
    if (member.key == key) return &member.value;
  }
  return nullptr;
}

JsonValue* JsonValue::Find(std::string_view key) {
  return const_cast<JsonValue*>(std::as_const(*this).Find(key));
}

void JsonValue::Add(std::string key, JsonValue value) {
  object().push_back({std::move(key), std::move(value)});
}

size_t JsonValue::size() const {
  if (is_array()) return array().size();
  if (is_object()) return object().size();
  return 0;
}

bool operator==(const JsonNumber& a, const JsonNumber& b) {
  return a.integer == b.integer && a.text == b.text;
}

bool operator==(const JsonMember& a, const JsonMember& b) {
  return a.key == b.key && a.value == b.value;
}

bool operator==(const JsonValue& a, const JsonValue& b) {
  return a.value_ == b.value_;
}

}  // namespace kc::protocol
