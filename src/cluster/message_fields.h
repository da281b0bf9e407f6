// MessageFields: checked reads of one JSON object's fields, for the decoders of the messages
// nodes send each other (work_message.h, outcome_record.h). A missing or mistyped field is
// kInternal naming the message and the field: the other node is ours, so a message we cannot
// read is our bug (or a version that should not share the cluster), never the client's. Never
// throws.
//
//   MessageFields fields(json, "outcome record");
//   KC_RETURN_IF_ERROR(fields.IsObject());
//   KC_RETURN_IF_ERROR(fields.Read("status", &record.status));  // required
//   std::optional<std::string> base64;                          // may be absent
//   KC_RETURN_IF_ERROR(fields.Read("body_base64", &base64));
//
// ipc/json_fields.h does the same for the worker conversation; ipc is a layer cluster may not
// use (scripts/check_layers.py), and base does not link nlohmann-json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::cluster {

class MessageFields {
 public:
  // `json` must outlive this object.
  MessageFields(const nlohmann::json& json, std::string what)
      : json_(json), what_(std::move(what)) {}

  Status IsObject() const;
  bool Has(const char* key) const;

  // Required fields: a missing one is an error.
  Status Read(const char* key, std::string* out) const;
  Status Read(const char* key, int64_t* out) const;
  Status Read(const char* key, int* out) const;
  Status Read(const char* key, uint64_t* out) const;  // a non-negative integer
  Status Read(const char* key, double* out) const;    // any number
  Status Read(const char* key, bool* out) const;
  Status Read(const char* key, std::vector<std::string>* out) const;
  // An array of two-string arrays (HTTP headers).
  Status Read(const char* key, std::vector<std::pair<std::string, std::string>>* out) const;

  // Optional fields: a missing one leaves `out` empty; a present one is read as above.
  template <typename T>
  Status Read(const char* key, std::optional<T>* out) const {
    out->reset();
    if (!Has(key)) return Status::Ok();
    T value{};
    KC_RETURN_IF_ERROR(Read(key, &value));
    *out = std::move(value);
    return Status::Ok();
  }

  // kInternal: "<what>: field '<key>' is <problem>".
  Status Bad(const char* key, const char* problem) const;

 private:
  // The field, or nullptr when it is missing.
  const nlohmann::json* Find(const char* key) const;

  const nlohmann::json& json_;
  const std::string what_;
};

}  // namespace kc::cluster
