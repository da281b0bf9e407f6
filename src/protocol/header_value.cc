#include "protocol/header_value.h"

#include <algorithm>

namespace kc::protocol {
namespace {

bool IsWhitespace(char c) {
  return c == ' ' || c == '\t';
}

// RFC 7230 tchar: what a parameter name may contain.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void SkipWhitespace(std::string_view text, size_t* pos) {
  while (*pos < text.size() && IsWhitespace(text[*pos]))
    ++*pos;
}

// Reads a quoted-string starting at the opening quote; handles backslash escapes.
StatusOr<std::string> ReadQuoted(std::string_view text, size_t* pos) {
  std::string value;
  for (size_t i = *pos + 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      *pos = i + 1;
      return value;
    }
    if (c == '\\') {
      if (++i == text.size()) break;
      c = text[i];
    }
    value += c;
  }
  return InvalidArgumentError("unterminated quoted string");
}

}  // namespace

std::vector<std::string> HeaderValue::Get(std::string_view name) const {
  std::vector<std::string> values;
  for (const auto& [key, value] : params) {
    if (key == name) values.push_back(value);
  }
  return values;
}

std::string AsciiLower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

std::string_view TrimWhitespace(std::string_view text) {
  while (!text.empty() && IsWhitespace(text.front()))
    text.remove_prefix(1);
  while (!text.empty() && IsWhitespace(text.back()))
    text.remove_suffix(1);
  return text;
}

StatusOr<HeaderValue> ParseHeaderValue(std::string_view value) {
  HeaderValue parsed;
  size_t pos = value.find(';');
  parsed.type = AsciiLower(TrimWhitespace(value.substr(0, pos)));
  if (parsed.type.empty()) return InvalidArgumentError("empty type");
  while (pos < value.size()) {
    ++pos;  // past ';'
    SkipWhitespace(value, &pos);
    if (pos == value.size()) break;  // a trailing ';' is harmless
    size_t name_start = pos;
    while (pos < value.size() && IsTokenChar(value[pos]))
      ++pos;
    std::string name = AsciiLower(value.substr(name_start, pos - name_start));
    SkipWhitespace(value, &pos);
    if (name.empty() || pos == value.size() || value[pos] != '=') {
      return InvalidArgumentError("malformed parameter");
    }
    ++pos;  // past '='
    SkipWhitespace(value, &pos);
    std::string param;
    if (pos < value.size() && value[pos] == '"') {
      KC_ASSIGN_OR_RETURN(param, ReadQuoted(value, &pos));
      SkipWhitespace(value, &pos);
      if (pos < value.size() && value[pos] != ';') {
        return InvalidArgumentError("text after quoted parameter " + name);
      }
    } else {
      size_t end = std::min(value.find(';', pos), value.size());
      param = std::string(TrimWhitespace(value.substr(pos, end - pos)));
      if (param.find('"') != std::string::npos) {
        return InvalidArgumentError("stray quote in parameter " + name);
      }
      pos = end;
    }
    parsed.params.emplace_back(std::move(name), std::move(param));
  }
  return parsed;
}

}  // namespace kc::protocol
