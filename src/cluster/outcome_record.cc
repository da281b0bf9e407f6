#include "cluster/outcome_record.h"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "protocol/json_fields.h"

namespace kc::cluster {

namespace {

constexpr char kWhat[] = "outcome record";

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

StatusOr<std::string> FromBase64(std::string_view text) {
  auto malformed = [] { return InternalError(std::string(kWhat) + ": malformed base64 body"); };
  if (text.size() % 4 != 0) return malformed();
  std::string out(3 * (text.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return malformed();
  // EVP_DecodeBlock counts the padding's zero bytes: drop one per '='.
  size_t pad = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i)
    ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

Status ReadBody(const protocol::JsonFields& fields, OutcomeRecord& r) {
  std::optional<std::string> base64;
  KC_RETURN_IF_ERROR(fields.Read("body_base64", &base64));
  if (base64) {
    if (fields.Has("body_sha256")) {
      return fields.Bad("body_sha256", "set beside 'body_base64' (a record carries one body)");
    }
    KC_ASSIGN_OR_RETURN(r.body, FromBase64(*base64));
    return Status::Ok();
  }
  if (!fields.Has("body_sha256")) {
    return fields.Bad("body_base64", "missing, and so is 'body_sha256'");
  }
  OutcomeBlob blob;
  KC_RETURN_IF_ERROR(fields.Read("body_sha256", &blob.sha256));
  KC_RETURN_IF_ERROR(fields.Read("body_bytes", &blob.bytes));
  KC_RETURN_IF_ERROR(fields.Read("holders", &blob.holders));
  r.body_blob = std::move(blob);
  return Status::Ok();
}

}  // namespace

std::string OutcomeRecord::Encode() const {
  nlohmann::json out = {{"status", status},
                        {"content_type", content_type},
                        {"retry_after", retry_after},
                        {"headers", headers},
                        {"ending", ending},
                        {"error_kind", error_kind},
                        {"error_message", error_message},
                        {"executed_by", executed_by}};
  if (body) out["body_base64"] = Base64(*body);
  if (body_blob) {
    out["body_sha256"] = body_blob->sha256;
    out["body_bytes"] = body_blob->bytes;
    out["holders"] = body_blob->holders;
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<OutcomeRecord> OutcomeRecord::Decode(std::string_view text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  protocol::JsonFields fields(json, kWhat, StatusCode::kInternal);
  KC_RETURN_IF_ERROR(fields.IsObject());
  OutcomeRecord r;
  KC_RETURN_IF_ERROR(fields.Read("status", &r.status));
  KC_RETURN_IF_ERROR(fields.Read("content_type", &r.content_type));
  KC_RETURN_IF_ERROR(fields.Read("retry_after", &r.retry_after));
  KC_RETURN_IF_ERROR(fields.Read("headers", &r.headers));
  KC_RETURN_IF_ERROR(fields.Read("ending", &r.ending));
  KC_RETURN_IF_ERROR(fields.Read("error_kind", &r.error_kind));
  KC_RETURN_IF_ERROR(fields.Read("error_message", &r.error_message));
  KC_RETURN_IF_ERROR(fields.Read("executed_by", &r.executed_by));
  KC_RETURN_IF_ERROR(ReadBody(fields, r));
  return r;
}

}  // namespace kc::cluster
