#include "protocol/json_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "protocol/utf8.h"

namespace kc::protocol {

namespace {

// Objects up to this size are checked for duplicate keys pairwise, which is
// cheaper than a hash set for the 1-4 keys of a value node.
constexpr size_t kPairwiseKeyCheck = 8;
// Long keys and literals are cut in error messages.
constexpr size_t kMaxQuoted = 100;

std::string Quote(std::string_view text) {
  if (text.size() > kMaxQuoted) return "'" + std::string(text.substr(0, kMaxQuoted)) + "...'";
  return "'" + std::string(text) + "'";
}

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One pass over the text with an explicit stack, so that nesting depth costs
// heap, not C++ stack. Values of open containers wait on `stack_` (keys too,
// for objects) and are moved into their container when it closes.
class Reader {
 public:
  Reader(std::string_view text, const JsonReadOptions& options) : text_(text), options_(options) {}

  StatusOr<JsonValue> Read();

 private:
  struct Open {
    bool object;
    size_t first;  // index in stack_ of its first member
  };

  Status StartMember();
  StatusOr<JsonValue> CloseContainer();
  StatusOr<JsonValue> ReadScalar();
  StatusOr<JsonValue> ReadNumber();
  Status ReadString(std::string& out);
  Status ReadEscape(std::string& out);
  StatusOr<uint32_t> ReadHex4();
  Status CheckUniqueKeys(size_t first) const;

  void SkipWhitespace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  bool Next(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  Status Error(std::string_view what) const;
  Status ErrorAt(std::string_view what, size_t pos) const;
  std::string Describe() const;  // the character at pos_, for messages

  const std::string_view text_;
  const JsonReadOptions& options_;
  size_t pos_ = 0;
  std::vector<Open> open_;
  std::vector<JsonMember> stack_;  // members of open containers (empty keys in arrays)
};

StatusOr<JsonValue> Reader::Read() {
  // Python's json.loads refuses a byte order mark too.
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") return Error("unexpected UTF-8 byte order mark");
  for (;;) {
    // A value starts here.
    SkipWhitespace();
    JsonValue value;
    if (Next('[') || Next('{')) {
      const bool object = Next('{');
      if (open_.size() >= options_.max_depth) {
        return Error("nesting deeper than " + std::to_string(options_.max_depth) + " levels");
      }
      ++pos_;
      open_.push_back({object, stack_.size()});
      SkipWhitespace();
      if (!Next(object ? '}' : ']')) {
        KC_RETURN_IF_ERROR(StartMember());
        continue;
      }
      ++pos_;
      KC_ASSIGN_OR_RETURN(value, CloseContainer());
    } else {
      KC_ASSIGN_OR_RETURN(value, ReadScalar());
    }
    // A value is complete: place it, and close every container it completes.
    for (;;) {
      if (open_.empty()) {
        SkipWhitespace();
        if (!AtEnd()) return Error("unexpected " + Describe() + " after the document");
        return value;
      }
      stack_.back().value = std::move(value);
      SkipWhitespace();
      const bool object = open_.back().object;
      if (Next(',')) {
        ++pos_;
        KC_RETURN_IF_ERROR(StartMember());
        break;
      }
      if (!Next(object ? '}' : ']')) {
        return Error(std::string("expected ',' or '") + (object ? '}' : ']') + "', got " +
                     Describe());
      }
      ++pos_;
      KC_ASSIGN_OR_RETURN(value, CloseContainer());
    }
  }
}

// Opens the slot of the next member: a key and ':' in an object.
Status Reader::StartMember() {
  if (!open_.back().object) {
    stack_.emplace_back();
    return Status::Ok();
  }
  SkipWhitespace();
  if (!Next('"')) return Error("expected a string key, got " + Describe());
  std::string key;
  KC_RETURN_IF_ERROR(ReadString(key));
  SkipWhitespace();
  if (!Next(':')) return Error("expected ':' after a key, got " + Describe());
  ++pos_;
  stack_.push_back({std::move(key), JsonValue()});
  return Status::Ok();
}

StatusOr<JsonValue> Reader::CloseContainer() {
  const Open open = open_.back();
  open_.pop_back();
  auto first = stack_.begin() + static_cast<std::ptrdiff_t>(open.first);
  JsonValue container;
  if (open.object) {
    KC_RETURN_IF_ERROR(CheckUniqueKeys(open.first));
    JsonObject members(std::make_move_iterator(first), std::make_move_iterator(stack_.end()));
    container = JsonValue::Object(std::move(members));
  } else {
    JsonArray items;
    items.reserve(static_cast<size_t>(stack_.end() - first));
    for (auto it = first; it != stack_.end(); ++it)
      items.push_back(std::move(it->value));
    container = JsonValue::Array(std::move(items));
  }
  stack_.erase(first, stack_.end());
  return container;
}

Status Reader::CheckUniqueKeys(size_t first) const {
  const size_t count = stack_.size() - first;
  if (count <= kPairwiseKeyCheck) {
    for (size_t i = first; i < stack_.size(); ++i) {
      for (size_t j = first; j < i; ++j) {
        if (stack_[i].key == stack_[j].key) return Error("duplicate key " + Quote(stack_[i].key));
      }
    }
    return Status::Ok();
  }
  std::unordered_set<std::string_view> keys;
  keys.reserve(count);
  for (size_t i = first; i < stack_.size(); ++i) {
    if (!keys.insert(stack_[i].key).second) {
      return Error("duplicate key " + Quote(stack_[i].key));
    }
  }
  return Status::Ok();
}

StatusOr<JsonValue> Reader::ReadScalar() {
  if (AtEnd()) return Error("unexpected end of input; expected a value");
  const char c = text_[pos_];
  if (c == '"') {
    std::string value;
    KC_RETURN_IF_ERROR(ReadString(value));
    return JsonValue::String(std::move(value));
  }
  if (c == '-' || IsDigit(c)) return ReadNumber();
  for (std::string_view literal : {"true", "false", "null"}) {
    if (text_.substr(pos_, literal.size()) == literal) {
      pos_ += literal.size();
      if (literal == "null") return JsonValue();
      return JsonValue::Boolean(literal == "true");
    }
  }
  return Error("unexpected " + Describe() + "; expected a value");
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? (RFC 8259 §6).
StatusOr<JsonValue> Reader::ReadNumber() {
  const size_t start = pos_;
  auto digits = [&] {
    size_t from = pos_;
    while (pos_ < text_.size() && IsDigit(text_[pos_]))
      ++pos_;
    return pos_ - from;
  };
  if (Next('-')) ++pos_;
  const size_t int_start = pos_;
  if (Next('0')) {
    ++pos_;
  } else if (digits() == 0) {
    return Error("expected a digit, got " + Describe());
  }
  const size_t int_digits = pos_ - int_start;
  bool integer = true;
  if (Next('.')) {
    ++pos_;
    integer = false;
    if (digits() == 0) return Error("expected a digit after '.', got " + Describe());
  }
  if (Next('e') || Next('E')) {
    ++pos_;
    integer = false;
    if (Next('+') || Next('-')) ++pos_;
    if (digits() == 0) return Error("expected a digit in the exponent, got " + Describe());
  }
  JsonValue number = JsonValue::Number({std::string(text_.substr(start, pos_ - start)), integer});
  if (integer && int_digits > options_.max_integer_digits) {
    return ErrorAt(
        "integer with more than " + std::to_string(options_.max_integer_digits) + " digits", start);
  }
  if (!integer) {
    std::optional<double> value = number.AsDouble();
    if (!value || !std::isfinite(*value)) {
      return ErrorAt("number " + Quote(number.number().text) + " is not finite", start);
    }
  }
  return number;
}

// Appends the string starting at the opening quote, unescaped, to `out`.
Status Reader::ReadString(std::string& out) {
  const size_t start = pos_;
  ++pos_;  // the opening quote
  for (;;) {
    // Copy the run of bytes that need no attention in one append.
    size_t run = pos_;
    while (run < text_.size()) {
      const auto byte = static_cast<unsigned char>(text_[run]);
      if (byte < 0x20 || byte == '"' || byte == '\\' || byte >= 0x80) break;
      ++run;
    }
    out.append(text_.substr(pos_, run - pos_));
    pos_ = run;
    if (AtEnd()) return ErrorAt("unterminated string", start);
    const auto byte = static_cast<unsigned char>(text_[pos_]);
    if (byte == '"') {
      ++pos_;
      return Status::Ok();
    }
    if (byte == '\\') {
      KC_RETURN_IF_ERROR(ReadEscape(out));
    } else if (byte < 0x20) {
      return Error("unescaped control character in a string");
    } else {
      Utf8Sequence sequence = ScanUtf8(text_, pos_);
      if (!sequence.valid) return Error("invalid UTF-8 in a string");
      out.append(text_.substr(pos_, sequence.length));
      pos_ += sequence.length;
    }
  }
}

Status Reader::ReadEscape(std::string& out) {
  ++pos_;  // the backslash
  if (AtEnd()) return Error("unterminated escape");
  const char c = text_[pos_++];
  switch (c) {
    case '"':
    case '\\':
    case '/':
      out += c;
      return Status::Ok();
    case 'b':
      out += '\b';
      return Status::Ok();
    case 'f':
      out += '\f';
      return Status::Ok();
    case 'n':
      out += '\n';
      return Status::Ok();
    case 'r':
      out += '\r';
      return Status::Ok();
    case 't':
      out += '\t';
      return Status::Ok();
    case 'u':
      break;
    default:
      --pos_;
      return Error("invalid escape '\\" + std::string(1, c) + "'");
  }
  KC_ASSIGN_OR_RETURN(uint32_t unit, ReadHex4());
  // A high surrogate directly followed by an escaped low one is a pair; any
  // other surrogate stays lone, as Python keeps it (WTF-8, json_value.h).
  if (unit >= 0xD800 && unit <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
    const size_t saved = pos_;
    pos_ += 2;
    KC_ASSIGN_OR_RETURN(uint32_t low, ReadHex4());
    if (low >= 0xDC00 && low <= 0xDFFF) {
      AppendUtf8(out, 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00));
      return Status::Ok();
    }
    pos_ = saved;  // not a pair: the second escape is read on its own
  }
  AppendUtf8(out, unit);
  return Status::Ok();
}

StatusOr<uint32_t> Reader::ReadHex4() {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    int digit = AtEnd() ? -1 : HexValue(text_[pos_]);
    if (digit < 0) return Error("expected four hex digits after '\\u'");
    value = value * 16 + static_cast<uint32_t>(digit);
    ++pos_;
  }
  return value;
}

std::string Reader::Describe() const {
  if (AtEnd()) return "end of input";
  const auto byte = static_cast<unsigned char>(text_[pos_]);
  if (byte >= 0x20 && byte < 0x7F) return "'" + std::string(1, text_[pos_]) + "'";
  static const char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[byte >> 4] + kHex[byte & 15];
}

Status Reader::Error(std::string_view what) const {
  return ErrorAt(what, pos_);
}

Status Reader::ErrorAt(std::string_view what, size_t pos) const {
  pos = std::min(pos, text_.size());
  const std::string_view before = text_.substr(0, pos);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t line_start = before.rfind('\n');
  const size_t column = line_start == std::string_view::npos ? pos + 1 : pos - line_start;
  return InvalidArgumentError("invalid JSON: " + std::string(what) + " at line " +
                              std::to_string(line) + ", column " + std::to_string(column));
}

}  // namespace

StatusOr<JsonValue> ReadJson(std::string_view text, const JsonReadOptions& options) {
  return Reader(text, options).Read();
}

}  // namespace kc::protocol
