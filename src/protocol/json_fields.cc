#include "protocol/json_fields.h"

#include <limits>

namespace kc::protocol {

Status JsonFields::IsObject() const {
  if (json_.is_object()) return Status::Ok();
  return Status(code_, what_ + ": not a JSON object");
}

const nlohmann::json* JsonFields::Find(const char* key) const {
  if (!json_.is_object()) return nullptr;
  auto it = json_.find(key);
  return it == json_.end() ? nullptr : &*it;
}

Status JsonFields::Read(const char* key, std::string* out) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return Bad(key, "missing");
  if (!field->is_string()) return Bad(key, "not a string");
  *out = field->get<std::string>();
  return Status::Ok();
}

Status JsonFields::Read(const char* key, int64_t* out) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return Bad(key, "missing");
  if (field->is_number_integer() && !field->is_number_unsigned()) {
    *out = field->get<int64_t>();
    return Status::Ok();
  }
  if (field->is_number_unsigned() &&
      field->get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()}) {
    *out = static_cast<int64_t>(field->get<uint64_t>());
    return Status::Ok();
  }
  return Bad(key, "not an integer");
}

Status JsonFields::Read(const char* key, int* out) const {
  int64_t wide = 0;
  KC_RETURN_IF_ERROR(Read(key, &wide));
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    return Bad(key, "out of range");
  }
  *out = static_cast<int>(wide);
  return Status::Ok();
}

Status JsonFields::Read(const char* key, uint64_t* out) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return Bad(key, "missing");
  if (field->is_number_unsigned() || (field->is_number_integer() && field->get<int64_t>() >= 0)) {
    *out = field->get<uint64_t>();
    return Status::Ok();
  }
  return Bad(key, "not a non-negative integer");
}

Status JsonFields::Read(const char* key, double* out) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return Bad(key, "missing");
  if (!field->is_number()) return Bad(key, "not a number");
  *out = field->get<double>();
  return Status::Ok();
}

Status JsonFields::Read(const char* key, bool* out) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return Bad(key, "missing");
  if (!field->is_boolean()) return Bad(key, "not a boolean");
  *out = field->get<bool>();
  return Status::Ok();
}

Status JsonFields::Read(const char* key, std::vector<std::string>* out) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return Bad(key, "missing");
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

Status JsonFields::Read(const char* key,
                        std::vector<std::pair<std::string, std::string>>* out) const {
  const nlohmann::json* field = Find(key);
  if (field == nullptr) return Bad(key, "missing");
  if (!field->is_array()) return Bad(key, "not an array of string pairs");
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(field->size());
  for (const nlohmann::json& pair : *field) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
      return Bad(key, "not an array of string pairs");
    }
    pairs.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
  }
  *out = std::move(pairs);
  return Status::Ok();
}

Status JsonFields::Bad(const char* key, const char* problem) const {
  return Status(code_, what_ + ": field '" + key + "' is " + problem);
}

}  // namespace kc::protocol
