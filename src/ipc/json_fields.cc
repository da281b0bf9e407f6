#include "ipc/json_fields.h"

namespace kc::ipc {

Status JsonFields::IsObject() const {
  if (json_.is_object()) return Status::Ok();
  return InvalidArgumentError(what_ + ": not a JSON object");
}

const nlohmann::json* JsonFields::Find(const char* key) const {
  if (!json_.is_object()) return nullptr;
  auto it = json_.find(key);
  return it == json_.end() ? nullptr : &*it;
}

Status JsonFields::String(const char* key, std::string* out, Presence presence) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) {
    return presence == Presence::kRequired ? Bad(key, "missing") : Status::Ok();
  }
  if (!field->is_string()) return Bad(key, "not a string");
  *out = field->get<std::string>();
  return Status::Ok();
}

Status JsonFields::Int(const char* key, int64_t* out, Presence presence) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) {
    return presence == Presence::kRequired ? Bad(key, "missing") : Status::Ok();
  }
  if (field->is_number_integer() && !field->is_number_unsigned()) {
    *out = field->get<int64_t>();
    return Status::Ok();
  }
  if (field->is_number_unsigned() && field->get<uint64_t>() <= uint64_t{INT64_MAX}) {
    *out = static_cast<int64_t>(field->get<uint64_t>());
    return Status::Ok();
  }
  return Bad(key, "not an integer");
}

Status JsonFields::Unsigned(const char* key, uint64_t* out, Presence presence) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) {
    return presence == Presence::kRequired ? Bad(key, "missing") : Status::Ok();
  }
  if (field->is_number_unsigned() || (field->is_number_integer() && field->get<int64_t>() >= 0)) {
    *out = field->get<uint64_t>();
    return Status::Ok();
  }
  return Bad(key, "not a non-negative integer");
}

Status JsonFields::StringList(const char* key, std::vector<std::string>* out,
                              Presence presence) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) {
    return presence == Presence::kRequired ? Bad(key, "missing") : Status::Ok();
  }
  if (!field->is_array()) return Bad(key, "not an array of strings");
  std::vector<std::string> values;
  values.reserve(field->size());
  for (const nlohmann::json& value : *field) {
    if (!value.is_string()) return Bad(key, "not an array of strings");
    values.push_back(value.get<std::string>());
  }
  *out = std::move(values);
  return Status::Ok();
}

Status JsonFields::Bad(const char* key, const char* problem) const {
  return InvalidArgumentError(what_ + ": field '" + key + "' is " + problem);
}

}  // namespace kc::ipc
