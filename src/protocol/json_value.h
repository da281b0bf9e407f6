// JsonValue: a JSON document as the wire carries it (spec/protocol.md §2.1, §4.2).
//
// Unlike nlohmann's types it holds everything Python's json module (the
// reference) reads and writes:
//   - objects keep their members in document order, in a vector, so building
//     one is linear (nlohmann::ordered_json scans its keys on every insert);
//   - numbers keep their text, so integers of any size pass through verbatim
//     (a Python int is arbitrary precision, §4.2) and floats are not re-printed;
//   - strings are WTF-8: UTF-8 in which a lone UTF-16 surrogate (the JSON
//     escape "\ud800", which Python reads and writes) is the 3-byte sequence
//     ED A0 80 .. ED BF BF. json_writer.h turns those back into escapes.
// Duplicate keys are refused by the reader (json_reader.h); code that builds a
// value itself must not add one twice.
//
// A value type: copyable and movable, not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kc::protocol {

class JsonValue;
struct JsonMember;

using JsonArray = std::vector<JsonValue>;
using JsonObject = std::vector<JsonMember>;

// A number as its JSON text, validated by whoever built it.
struct JsonNumber {
  std::string text;
  bool integer = false;  // no fraction and no exponent
};

class JsonValue {
 public:
  enum class Type { kNull, kBoolean, kNumber, kString, kArray, kObject };

  // Factories are defined out of line: building a value destroys a Storage,
  // which needs JsonMember complete (Clang checks where GCC waits).
  JsonValue();  // null
  static JsonValue Boolean(bool value);
  static JsonValue Integer(int64_t value);
  static JsonValue Unsigned(uint64_t value);
  // `value` must be finite; written in its shortest round-trip form.
  static JsonValue Double(double value);
  // `number` must be valid JSON number text (json_reader.cc checks the wire's).
  static JsonValue Number(JsonNumber number);
  static JsonValue String(std::string value);
  static JsonValue Array();
  static JsonValue Array(JsonArray items);
  static JsonValue Object();
  static JsonValue Object(JsonObject members);

  Type type() const { return static_cast<Type>(value_.index()); }
  bool is_null() const { return type() == Type::kNull; }
  bool is_boolean() const { return type() == Type::kBoolean; }
  bool is_number() const { return type() == Type::kNumber; }
  bool is_integer() const { return is_number() && number().integer; }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  // Accessors for the held type; calling one for another type is a bug (aborts).
  bool boolean() const { return std::get<bool>(value_); }
  const JsonNumber& number() const { return std::get<JsonNumber>(value_); }
  const std::string& string() const { return std::get<std::string>(value_); }
  std::string& string() { return std::get<std::string>(value_); }
  const JsonArray& array() const { return std::get<JsonArray>(value_); }
  JsonArray& array() { return std::get<JsonArray>(value_); }
  const JsonObject& object() const { return std::get<JsonObject>(value_); }
  JsonObject& object() { return std::get<JsonObject>(value_); }

  // The integer's value if it is an integer in range; nullopt otherwise.
  std::optional<int64_t> AsInt64() const;
  std::optional<uint64_t> AsUint64() const;
  // The number's nearest double (±infinity beyond the range); nullopt if not a number.
  std::optional<double> AsDouble() const;
  bool IsString(std::string_view text) const { return is_string() && string() == text; }

  // Object member lookup, linear in the member count (value nodes have at
  // most four). Null if this is not an object or has no such key.
  const JsonValue* Find(std::string_view key) const;
  JsonValue* Find(std::string_view key);
  // Appends a member; the key must not be present already.
  void Add(std::string key, JsonValue value);
  // Number of members or elements; 0 for scalars.
  size_t size() const;

  friend bool operator==(const JsonValue& a, const JsonValue& b);

 private:
  // Index order matches Type.
  using Storage =
      std::variant<std::monostate, bool, JsonNumber, std::string, JsonArray, JsonObject>;
  explicit JsonValue(Storage value);

  Storage value_;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

bool operator==(const JsonNumber& a, const JsonNumber& b);
bool operator==(const JsonMember& a, const JsonMember& b);

inline JsonValue::JsonValue() = default;
inline JsonValue::JsonValue(Storage value) : value_(std::move(value)) {}
inline JsonValue JsonValue::Boolean(bool value) {
  return JsonValue(Storage(value));
}
inline JsonValue JsonValue::Number(JsonNumber number) {
  return JsonValue(Storage(std::move(number)));
}
inline JsonValue JsonValue::String(std::string value) {
  return JsonValue(Storage(std::move(value)));
}

}  // namespace kc::protocol
