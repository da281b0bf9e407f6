#include "protocol/strict_json.h"

#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "protocol/strict_ordered_json.h"

namespace kc::protocol {
namespace {

// Nesting deeper than this is refused. The reference server's Python parser
// stops near its recursion limit (~1000), and recursive consumers of the
// parsed value (dump, value walkers) stay far from the stack limit.
constexpr size_t kMaxNestingDepth = 1000;

// Builds the document from nlohmann's SAX events, refusing what nlohmann's
// own DOM parser accepts but the wire does not (§2.1): duplicate keys, a
// non-finite number, excessive nesting. Invalid UTF-8, NaN/Infinity literals
// and trailing garbage are already syntax errors in nlohmann's lexer.
template <typename Json>
class StrictBuilder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  explicit StrictBuilder(Json& root) : root_(root) {}

  const std::string& error() const { return error_; }

  bool null() { return AddValue(Json(nullptr)); }
  bool boolean(bool value) { return AddValue(Json(value)); }
  bool number_integer(number_integer_t value) { return AddValue(Json(value)); }
  bool number_unsigned(number_unsigned_t value) { return AddValue(Json(value)); }
  bool number_float(number_float_t value, const string_t& literal) {
    if (!std::isfinite(value)) return Fail("number '" + literal + "' is not finite");
    return AddValue(Json(value));
  }
  bool string(string_t& value) { return AddValue(Json(std::move(value))); }
  bool binary(binary_t& /*value*/) { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t /*size*/) {
    if (!OpenContainer(Json::object())) return false;
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& name) {
    if (!keys_.back().insert(name).second) return Fail("duplicate key '" + name + "'");
    pending_key_ = std::move(name);
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*size*/) { return OpenContainer(Json::array()); }
  bool end_array() {
    open_.pop_back();
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) {
    // what() reads "[json.exception.parse_error.101] parse error at ..."; keep the prose.
    std::string what = e.what();
    if (size_t close = what.find("] ");
        what.rfind("[json.exception.", 0) == 0 && close != std::string::npos) {
      what.erase(0, close + 2);
    }
    return Fail(what);
  }

 private:
  // Places `value` as the root, the next array element or the pending key's
  // value, and returns where it now lives.
  Json* Place(Json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    auto& object = parent.template get_ref<typename Json::object_t&>();
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      // key() already refused duplicates; skip ordered_map's linear lookup.
      object.emplace_back(std::move(pending_key_), std::move(value));
      return &object.back().second;
    } else {
      return &object.emplace(std::move(pending_key_), std::move(value)).first->second;
    }
  }

  bool AddValue(Json&& value) {
    Place(std::move(value));
    return true;
  }

  // Pointers in open_ stay valid: a container only grows while it is the
  // innermost open one.
  bool OpenContainer(Json&& empty) {
    if (open_.size() >= kMaxNestingDepth) {
      return Fail("nesting deeper than " + std::to_string(kMaxNestingDepth) + " levels");
    }
    open_.push_back(Place(std::move(empty)));
    return true;
  }

  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  Json& root_;
  std::vector<Json*> open_;
  std::vector<std::unordered_set<std::string>> keys_;  // one per open object
  string_t pending_key_;
  std::string error_;
};

template <typename Json>
StatusOr<Json> ParseStrict(std::string_view text) {
  // nlohmann skips a UTF-8 byte order mark; the wire format has none.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    return InvalidArgumentError("invalid JSON: unexpected UTF-8 byte order mark");
  }
  Json root;
  StrictBuilder<Json> builder(root);
  bool parsed = false;
  try {
    parsed =
        Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                        /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    // sax_parse reports through parse_error; this only guards library surprises.
    return InvalidArgumentError(std::string("invalid JSON: ") + e.what());
  }
  if (!parsed) {
    std::string error = builder.error().empty() ? "malformed input" : builder.error();
    return InvalidArgumentError("invalid JSON: " + error);
  }
  return root;
}

}  // namespace

StatusOr<nlohmann::json> ParseStrictJson(std::string_view text) {
  return ParseStrict<nlohmann::json>(text);
}

StatusOr<nlohmann::ordered_json> ParseStrictOrderedJson(std::string_view text) {
  return ParseStrict<nlohmann::ordered_json>(text);
}

}  // namespace kc::protocol
