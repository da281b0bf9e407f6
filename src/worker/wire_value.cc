#include "worker/wire_value.h"

#include <charconv>
#include <cmath>
#include <string_view>

namespace kc::worker {

namespace {

using Json = nlohmann::ordered_json;

// A JSON string as Python's json.dumps(ensure_ascii=False) writes it. The text is valid UTF-8
// here (it came through nlohmann's parser or from C++), so only quotes, backslashes and control
// characters need escapes. (nlohmann's own dump looks up the locale on every call: too slow for
// every leaf of every seal.)
void AppendString(std::string_view text, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  size_t run = 0;  // start of the characters not yet copied
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text, run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
    }
  }
  out.append(text, run, text.size() - run);
  out += '"';
}

// The shortest text that reads back as `value`, with ".0" kept on integral values so that it
// stays a float (as protocol/json_value.cc writes doubles).
void AppendDouble(double value, std::string& out) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  const std::string_view text(buffer, ec == std::errc() ? end - buffer : 0);
  out += text;
  if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

}  // namespace

Status AppendWireValue(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      out += R"({"type":"null"})";
      return Status::Ok();
    case Json::value_t::boolean:
      out += value.get<bool>() ? R"({"type":"boolean","value":true})"
                               : R"({"type":"boolean","value":false})";
      return Status::Ok();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      out += R"({"type":"integer","value":)";
      out += value.is_number_unsigned() ? std::to_string(value.get<uint64_t>())
                                        : std::to_string(value.get<int64_t>());
      out += '}';
      return Status::Ok();
    case Json::value_t::number_float:
      if (!std::isfinite(value.get<double>())) {
        return InvalidArgumentError("a sealed result cannot hold a non-finite number");
      }
      out += R"({"type":"number","value":)";
      AppendDouble(value.get<double>(), out);
      out += '}';
      return Status::Ok();
    case Json::value_t::string:
      out += R"({"type":"string","value":)";
      AppendString(value.get_ref<const std::string&>(), out);
      out += '}';
      return Status::Ok();
    case Json::value_t::array: {
      out += R"({"type":"array","value":[)";
      bool first = true;
      for (const Json& item : value) {
        if (!first) out += ',';
        first = false;
        KC_RETURN_IF_ERROR(AppendWireValue(item, out));
      }
      out += "]}";
      return Status::Ok();
    }
    case Json::value_t::object: {
      out += R"({"type":"object","value":{)";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out += ',';
        first = false;
        AppendString(key, out);
        out += ':';
        KC_RETURN_IF_ERROR(AppendWireValue(item, out));
      }
      out += "}}";
      return Status::Ok();
    }
    case Json::value_t::binary:
      break;
  }
  return InvalidArgumentError("a sealed result cannot hold binary data");
}

}  // namespace kc::worker
