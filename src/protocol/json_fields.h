// JsonFields: checked reads of one JSON object's fields, for decoders of objects another process
// of ours wrote: the worker conversation's (ipc/sandbox_spec.h, ipc/worker_settings.h) and the
// messages nodes send each other (cluster/work_message.h, cluster/outcome_record.h). A missing
// or mistyped field is an error of the code the decoder chose, naming the object and the field:
// kInvalidArgument where the JSON may come from a worker running user code, kInternal where a
// message we cannot read is our bug (the other node is ours). Never throws.
//
//   JsonFields fields(json, "outcome record", StatusCode::kInternal);
//   KC_RETURN_IF_ERROR(fields.IsObject());
//   KC_RETURN_IF_ERROR(fields.Read("status", &record.status));  // required
//   std::optional<std::string> base64;                          // may be absent
//   KC_RETURN_IF_ERROR(fields.Read("body_base64", &base64));
//   KC_RETURN_IF_ERROR(fields.ReadIfPresent("gpu_arch", &settings.gpu_arch));  // else its default
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kc::protocol {

class JsonFields {
 public:
  // `json` must outlive this object; its errors are of `code`.
  JsonFields(const nlohmann::json& json, std::string what,
             StatusCode code = StatusCode::kInvalidArgument)
      : json_(json), what_(std::move(what)), code_(code) {}

  Status IsObject() const;
  bool Has(const char* key) const { return Find(key) != nullptr; }
  // The field, or nullptr when it is missing (or `json` is not an object).
  const nlohmann::json* Find(const char* key) const;

  // Required fields: a missing one is an error.
  Status Read(const char* key, std::string* out) const;
  Status Read(const char* key, int64_t* out) const;  // fits int64_t
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

  // Fields with a default: a missing one leaves `out` as it was.
  template <typename T>
  Status ReadIfPresent(const char* key, T* out) const {
    return Has(key) ? Read(key, out) : Status::Ok();
  }

  // "<what>: field '<key>' is <problem>", of this reader's code.
  Status Bad(const char* key, const char* problem) const;

 private:
  const nlohmann::json& json_;
  const std::string what_;
  const StatusCode code_;
};

}  // namespace kc::protocol
