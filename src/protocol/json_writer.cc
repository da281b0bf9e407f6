#include "protocol/json_writer.h"

#include <cmath>

#include "protocol/utf8.h"

namespace kc::protocol {

namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendUnicodeEscape(std::string& out, uint16_t unit) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4)
    out += kHex[(unit >> shift) & 15];
}

}  // namespace

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (has_members_.empty()) return;
  if (has_members_.back()) out_ += ',';
  has_members_.back() = true;
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  has_members_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  has_members_.pop_back();
  out_ += '}';
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  has_members_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  has_members_.pop_back();
  out_ += ']';
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  BeforeValue();
  AppendString(key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view text) {
  BeforeValue();
  AppendString(text);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  if (!std::isfinite(value)) return Null();
  BeforeValue();
  out_ += JsonValue::Double(value).number().text;
  return *this;
}

JsonWriter& JsonWriter::Value(const JsonValue& value) {
  switch (value.type()) {
    case JsonValue::Type::kNull:
      return Null();
    case JsonValue::Type::kBoolean:
      return Bool(value.boolean());
    case JsonValue::Type::kNumber:
      BeforeValue();
      out_ += value.number().text;
      return *this;
    case JsonValue::Type::kString:
      return String(value.string());
    case JsonValue::Type::kArray:
      BeginArray();
      for (const JsonValue& item : value.array())
        Value(item);
      return EndArray();
    case JsonValue::Type::kObject:
      BeginObject();
      for (const JsonMember& member : value.object())
        Key(member.key).Value(member.value);
      return EndObject();
  }
  return *this;
}

void JsonWriter::AppendString(std::string_view text) {
  out_ += '"';
  size_t pos = 0;
  while (pos < text.size()) {
    // Copy the run of plain ASCII in one append.
    size_t run = pos;
    while (run < text.size()) {
      const auto byte = static_cast<unsigned char>(text[run]);
      if (byte < 0x20 || byte == '"' || byte == '\\' || byte >= 0x80) break;
      ++run;
    }
    out_.append(text.substr(pos, run - pos));
    pos = run;
    if (pos == text.size()) break;
    const auto byte = static_cast<unsigned char>(text[pos]);
    uint16_t surrogate = 0;
    if (byte == '"' || byte == '\\') {
      out_ += '\\';
      out_ += static_cast<char>(byte);
      ++pos;
    } else if (byte < 0x20) {
      switch (byte) {
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        default:
          AppendUnicodeEscape(out_, byte);
      }
      ++pos;
    } else if (IsWtf8Surrogate(text, pos, &surrogate)) {
      AppendUnicodeEscape(out_, surrogate);
      pos += 3;
    } else {
      Utf8Sequence sequence = ScanUtf8(text, pos);
      if (sequence.valid) {
        out_.append(text.substr(pos, sequence.length));
      } else {
        out_ += "\xEF\xBF\xBD";  // U+FFFD
      }
      pos += sequence.length;
    }
  }
  out_ += '"';
}

std::string WriteJson(const JsonValue& value) {
  std::string out;
  JsonWriter(out).Value(value);
  return out;
}

}  // namespace kc::protocol
