#include "cluster/work_message.h"

#include <nlohmann/json.hpp>

#include "protocol/json_fields.h"

namespace kc::cluster {

std::string TenantSubjectToken(std::string_view tenant) {
  return tenant == kAnonymousTenant ? "anonymous" : std::string(tenant);
}

std::string WorkMessage::Encode() const {
  nlohmann::json out = {{"key", key},
                        {"request_id", request_id},
                        {"entry_node", entry_node},
                        {"entry_url", entry_url},
                        {"deadline_unix_ms", deadline_unix_ms},
                        {"timeout_seconds", timeout_seconds},
                        {"output_limit_bytes", output_limit_bytes},
                        {"tenant", tenant},
                        {"weight", weight}};
  if (claim) out["claim"] = *claim;
  if (retry) out["retry"] = true;
  if (queued_unix_us) out["queued_unix_us"] = *queued_unix_us;
  if (program) out["program"] = *program;
  if (program_sha256) out["program_sha256"] = *program_sha256;
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<WorkMessage> WorkMessage::Decode(std::string_view text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  protocol::JsonFields fields(json, "work message", StatusCode::kInternal);
  KC_RETURN_IF_ERROR(fields.IsObject());
  WorkMessage m;
  KC_RETURN_IF_ERROR(fields.Read("key", &m.key));
  if (m.key.empty()) return fields.Bad("key", "empty");
  KC_RETURN_IF_ERROR(fields.Read("request_id", &m.request_id));
  KC_RETURN_IF_ERROR(fields.Read("entry_node", &m.entry_node));
  KC_RETURN_IF_ERROR(fields.Read("entry_url", &m.entry_url));
  KC_RETURN_IF_ERROR(fields.Read("deadline_unix_ms", &m.deadline_unix_ms));
  KC_RETURN_IF_ERROR(fields.Read("timeout_seconds", &m.timeout_seconds));
  KC_RETURN_IF_ERROR(fields.Read("output_limit_bytes", &m.output_limit_bytes));
  KC_RETURN_IF_ERROR(fields.Read("tenant", &m.tenant));
  KC_RETURN_IF_ERROR(fields.Read("weight", &m.weight));
  KC_RETURN_IF_ERROR(fields.Read("claim", &m.claim));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent("retry", &m.retry));
  KC_RETURN_IF_ERROR(fields.Read("queued_unix_us", &m.queued_unix_us));
  KC_RETURN_IF_ERROR(fields.Read("program", &m.program));
  KC_RETURN_IF_ERROR(fields.Read("program_sha256", &m.program_sha256));
  if (m.program && m.program_sha256) {
    return fields.Bad("program_sha256", "set beside 'program' (a message carries one of them)");
  }
  if (!m.program && !m.program_sha256) {
    return fields.Bad("program", "missing, and so is 'program_sha256'");
  }
  return m;
}

}  // namespace kc::cluster
