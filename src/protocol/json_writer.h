// JsonWriter: appends compact JSON text, for every /execute body the server
// writes (spec/protocol.md §4).
//
// Spelled as Python's json.dumps(..., ensure_ascii=False, separators=(",", ":"))
// spells it, which is also how the worker writes its outcome (so a result's
// size on the wire is known before it is rebuilt, outcome_reply.cc):
//   - strings are UTF-8; '"', '\\' and control characters are escaped
//     (\b \f \n \r \t, else \u00XX), and a WTF-8 lone surrogate (json_value.h)
//     becomes its "\udXXX" escape, which Python reads back as the same string;
//     bytes that are not UTF-8 become U+FFFD;
//   - numbers held as text are copied verbatim (integers of any size);
//   - a non-finite double, which JSON cannot hold, is written as null.
//
// Usage:
//   std::string out;
//   JsonWriter w(out);
//   w.BeginObject().Key("status").String("ok").Key("n").Int(3).EndObject();
// Calls must form one well-nested document; the writer does not check.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/json_value.h"

namespace kc::protocol {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view text);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Value(const JsonValue& value);

 private:
  void BeforeValue();
  void AppendString(std::string_view text);

  std::string& out_;
  std::vector<bool> has_members_;  // per open container
  bool after_key_ = false;
};

// The compact text of `value`.
std::string WriteJson(const JsonValue& value);

}  // namespace kc::protocol
