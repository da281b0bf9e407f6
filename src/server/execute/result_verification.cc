#include "server/execute/result_verification.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/hmac_sha256.h"
#include "base/sha256.h"
#include "protocol/json_reader.h"
#include "protocol/value_codec.h"

namespace kc::server {

namespace {

using protocol::JsonMember;
using protocol::JsonValue;

JsonValue Node(std::string_view type, JsonValue value) {
  JsonValue node = JsonValue::Object();
  node.Add("type", JsonValue::String(std::string(type)));
  node.Add("value", std::move(value));
  return node;
}

JsonValue BooleanNode(bool value) {
  return Node("boolean", JsonValue::Boolean(value));
}

JsonValue StringNode(std::string value) {
  return Node("string", JsonValue::String(std::move(value)));
}

JsonValue NullNode() {
  JsonValue node = JsonValue::Object();
  node.Add("type", JsonValue::String("null"));
  return node;
}

// The members of an object node ({"type":"object","value":{...}}), or null.
JsonValue* ObjectMembers(JsonValue& node) {
  const JsonValue* type = node.Find("type");
  JsonValue* value = node.Find("value");
  if (type == nullptr || !type->IsString("object") || value == nullptr || !value->is_object()) {
    return nullptr;
  }
  return value;
}

const JsonValue* ObjectMembers(const JsonValue& node) {
  return ObjectMembers(const_cast<JsonValue&>(node));
}

// The text of a string node, or null.
const std::string* StringOf(const JsonValue* node) {
  if (node == nullptr) return nullptr;
  const JsonValue* type = node->Find("type");
  const JsonValue* value = node->Find("value");
  if (type == nullptr || !type->IsString("string") || value == nullptr || !value->is_string()) {
    return nullptr;
  }
  return &value->string();
}

void Remove(JsonValue& object, std::string_view key) {
  auto& members = object.object();
  members.erase(std::remove_if(members.begin(), members.end(),
                               [&](const JsonMember& member) { return member.key == key; }),
                members.end());
}

void Set(JsonValue& object, std::string_view key, JsonValue value) {
  if (JsonValue* existing = object.Find(key)) {
    *existing = std::move(value);
  } else {
    object.Add(std::string(key), std::move(value));
  }
}

// Whether integrity member `key` (a wire-encoded list) is an empty list; `absent_is_empty` for
// a member older records or the host timer do not write.
bool EmptyList(const JsonValue& integrity, std::string_view key, bool absent_is_empty) {
  const JsonValue* member = integrity.Find(key);
  if (member == nullptr) return absent_is_empty;
  const JsonValue* items = member->Find("value");
  return items != nullptr && items->is_array() && items->size() == 0;
}

// Equal as values: numbers by what they denote (Python and the worker's C++ may spell the
// same float differently), object members in any order.
bool SameValue(const JsonValue& a, const JsonValue& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case JsonValue::Type::kNumber:
      if (a.is_integer() && b.is_integer()) return a.number().text == b.number().text;
      return a.AsDouble() == b.AsDouble();
    case JsonValue::Type::kArray:
      return std::equal(a.array().begin(), a.array().end(), b.array().begin(), b.array().end(),
                        SameValue);
    case JsonValue::Type::kObject:
      if (a.size() != b.size()) return false;
      for (const JsonMember& member : a.object()) {
        const JsonValue* other = b.Find(member.key);
        if (other == nullptr || !SameValue(member.value, *other)) return false;
      }
      return true;
    case JsonValue::Type::kNull:
    case JsonValue::Type::kBoolean:
    case JsonValue::Type::kString:
      return a == b;
  }
  return false;
}

class Verifier {
 public:
  explicit Verifier(const SealCheck& check) : check_(check) {}
  const SealTally& tally() const { return tally_; }

  void Walk(JsonValue& node) {
    const JsonValue* type = node.Find("type");
    if (type == nullptr) return;
    if (type->IsString("array")) {
      if (JsonValue* items = node.Find("value"); items != nullptr && items->is_array()) {
        for (JsonValue& item : items->array())
          Walk(item);
      }
      return;
    }
    JsonValue* members = ObjectMembers(node);
    if (members == nullptr) return;
    if (members->Find("integrity") != nullptr && Verify(node)) return;  // the record is ours
    for (JsonMember& member : members->object())
      Walk(member.value);
  }

 private:
  // Replaces `node` by its record and returns true, or marks it unverified and returns false.
  bool Verify(JsonValue& node) {
    JsonValue& integrity = *ObjectMembers(node)->Find("integrity");
    if (ObjectMembers(integrity) == nullptr) {
      integrity = Node("object", JsonValue::Object());
      return Refuse(integrity, "no seal: integrity is not an object made by kcoral's timer");
    }
    JsonValue& fields = *ObjectMembers(integrity);
    const std::string* record_text = StringOf(fields.Find("record"));
    const std::string* seal = StringOf(fields.Find("seal"));
    if (record_text == nullptr || seal == nullptr) {
      return Refuse(integrity, "no seal: integrity has no record and seal from kcoral's timer");
    }
    if (check_.seal_key.empty() ||
        !ConstantTimeEquals(HmacSha256Hex(check_.seal_key, *record_text), *seal)) {
      return Refuse(integrity,
                    "bad seal: the record was not sealed by the worker that ran this request, "
                    "or was changed after sealing");
    }
    std::string why;
    std::optional<JsonValue> record = ReadRecord(*record_text, why);
    if (!record) return Refuse(integrity, "unreadable record: " + why);
    JsonValue& record_integrity = *ObjectMembers(*ObjectMembers(*record)->Find("integrity"));
    const std::string* request_id = StringOf(record_integrity.Find("request_id"));
    if (*request_id != check_.request_id) {
      return Refuse(integrity, "another request's record: it was sealed for request '" +
                                   *request_id + "', not this one");
    }

    // What user code returned, less what the seal adds, against what the timer measured.
    Remove(fields, "record");
    Remove(fields, "seal");
    Remove(fields, "verified");
    const bool altered = !SameValue(node, *record);

    // altered_after_timing compares what the worker sealed, before the server's additions.
    Append(record_integrity, "conditions", check_.conditions);
    // Trusted means nothing flagged and every output the call produced checked: a grader pays
    // on this one key (docs/benchmark-integrity.md).
    const bool trusted = EmptyList(record_integrity, "flags", false) &&
                         EmptyList(record_integrity, "outputs_unchecked", true);
    Set(record_integrity, "verified", BooleanNode(true));
    Set(record_integrity, "trusted", BooleanNode(trusted));
    Set(record_integrity, "altered_after_timing", BooleanNode(altered));
    Set(record_integrity, "provenance", Provenance(record_integrity));
    node = std::move(*record);
    ++(trusted ? tally_.trusted : tally_.flagged);
    return true;
  }

  // The record as a value tree with an integrity object holding a string request_id.
  static std::optional<JsonValue> ReadRecord(const std::string& text, std::string& why) {
    StatusOr<JsonValue> parsed =
        protocol::ReadJson(text, {.max_depth = protocol::kMaxOutcomeDepth});
    if (!parsed.ok()) {
      why = parsed.status().message();
      return std::nullopt;
    }
    // The checks every returned value passes; a record has no binary parts.
    JsonValue wrapper = JsonValue::Object();
    wrapper.Add("record", std::move(*parsed));
    if (Status valid = protocol::FinalizeResults(wrapper, {}); !valid.ok()) {
      why = valid.message();
      return std::nullopt;
    }
    JsonValue record = std::move(wrapper.object().front().value);
    const JsonValue* members = ObjectMembers(record);
    const JsonValue* integrity = members ? members->Find("integrity") : nullptr;
    const JsonValue* fields = integrity ? ObjectMembers(*integrity) : nullptr;
    if (fields == nullptr || StringOf(fields->Find("request_id")) == nullptr) {
      why = "no integrity.request_id";
      return std::nullopt;
    }
    return record;
  }

  // Adds `texts` as string nodes to the array node `key` of `fields` (made if missing; left
  // alone if it is not an array: the flags check then finds it untrusted anyway).
  static void Append(JsonValue& fields, std::string_view key,
                     const std::vector<std::string>& texts) {
    if (texts.empty()) return;
    if (fields.Find(key) == nullptr) Set(fields, key, Node("array", JsonValue::Array()));
    JsonValue* items = fields.Find(key)->Find("value");
    if (items == nullptr || !items->is_array()) return;
    for (const std::string& text : texts)
      items->array().push_back(StringNode(text));
  }

  bool Refuse(JsonValue& integrity, std::string reason) {
    JsonValue& fields = *ObjectMembers(integrity);
    Remove(fields, "altered_after_timing");  // written by the server only
    Remove(fields, "provenance");
    Set(fields, "verified", BooleanNode(false));
    Set(fields, "trusted", BooleanNode(false));
    Set(fields, "reason", StringNode(std::move(reason)));
    ++tally_.unverified;
    return false;
  }

  JsonValue Provenance(const JsonValue& record_integrity) {
    JsonValue instruction_id = NullNode();
    const JsonValue* index_node = record_integrity.Find("instruction_index");
    const JsonValue* index_value = index_node ? index_node->Find("value") : nullptr;
    std::optional<uint64_t> index = index_value ? index_value->AsUint64() : std::nullopt;
    const auto& instructions = check_.program->instructions;
    if (index && *index < instructions.size() && !instructions[*index].id.empty()) {
      instruction_id = StringNode(instructions[*index].id);
    }
    JsonValue members = JsonValue::Object();
    members.Add("instruction_id", std::move(instruction_id));
    members.Add("uploads", Node("object", Uploads()));
    return Node("object", std::move(members));
  }

  // Computed once per request: module sources are hashed only when a record needs them.
  const JsonValue& Uploads() {
    if (!uploads_) {
      uploads_ = JsonValue::Object();
      for (const protocol::Instruction& instruction : check_.program->instructions) {
        if (instruction.op != protocol::Op::kUpload) continue;
        std::string digest = instruction.upload_kind == protocol::UploadKind::kModule
                                 ? Sha256Hex(instruction.source)
                                 : instruction.blob;
        uploads_->Add(instruction.id, StringNode(std::move(digest)));
      }
    }
    return *uploads_;
  }

  const SealCheck& check_;
  std::optional<JsonValue> uploads_;
  SealTally tally_;
};

}  // namespace

bool MayHoldIntegrity(std::string_view outcome_json) {
  return outcome_json.find("integrity") != std::string_view::npos ||
         outcome_json.find("\\u") != std::string_view::npos;
}

std::string SealTally::Verdict() const {
  if (unverified > 0) return "unverified";
  if (flagged > 0) return "flagged";
  return trusted > 0 ? "trusted" : "";
}

SealTally VerifySealedResults(JsonValue& results, const SealCheck& check) {
  if (!results.is_object()) return {};
  Verifier verifier(check);
  for (JsonMember& member : results.object())
    verifier.Walk(member.value);
  return verifier.tally();
}

}  // namespace kc::server
