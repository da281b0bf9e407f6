// JsonFields: checked reads of one JSON object's fields, for the decoders of ipc/ whose values
// are objects inside a message (sandbox_spec.h, worker_settings.h). A field of the wrong type is
// kInvalidArgument naming the object and the field; a missing optional field leaves the output
// as it was (its default). Never throws: the JSON may come from a worker running user code.
//
//   JsonFields fields(json, "sandbox spec");
//   KC_RETURN_IF_ERROR(fields.IsObject());
//   KC_RETURN_IF_ERROR(fields.String("workspace", &spec.workspace, Presence::kRequired));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::ipc {

enum class Presence { kRequired, kOptional };

class JsonFields {
 public:
  // `json` must outlive this object.
  JsonFields(const nlohmann::json& json, std::string what) : json_(json), what_(std::move(what)) {}

  Status IsObject() const;
  // The field, or nullptr when it is missing (or `json` is not an object).
  const nlohmann::json* Find(const char* key) const;

  Status String(const char* key, std::string* out, Presence presence) const;
  Status Int(const char* key, int64_t* out, Presence presence) const;  // fits int64_t
  // A non-negative integer (sizes, ids).
  Status Unsigned(const char* key, uint64_t* out, Presence presence) const;
  Status StringList(const char* key, std::vector<std::string>* out, Presence presence) const;

  // kInvalidArgument: "<what>: field '<key>' is <problem>".
  Status Bad(const char* key, const char* problem) const;

 private:
  const nlohmann::json& json_;
  const std::string what_;
};

}  // namespace kc::ipc
