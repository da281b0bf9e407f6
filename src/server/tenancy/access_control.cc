#include "server/tenancy/access_control.h"

namespace kc::server {

namespace {

constexpr auto kWindow = std::chrono::minutes(1);

// "10.0.0.7:51234" -> "10.0.0.7": failures count per address, not per connection.
std::string_view Address(std::string_view source) {
  const size_t colon = source.rfind(':');
  return colon == std::string_view::npos ? source : source.substr(0, colon);
}

}  // namespace

StatusOr<std::unique_ptr<AccessControl>> AccessControl::Load(const std::filesystem::path& file) {
  auto control = std::make_unique<AccessControl>();
  control->file_ = file;
  KC_RETURN_IF_ERROR(control->Reload());
  return control;
}

Status AccessControl::Reload() {
  KC_ASSIGN_OR_RETURN(AccessKeys keys, AccessKeys::Load(file_));
  std::lock_guard lock(mu_);
  keys_ = std::make_shared<const AccessKeys>(std::move(keys));
  return Status::Ok();
}

size_t AccessControl::key_count() const {
  std::lock_guard lock(mu_);
  return keys_ ? keys_->size() : 0;
}

TenantLimits AccessControl::LimitsOf(const std::string& tenant) const {
  std::lock_guard lock(mu_);
  return keys_ ? keys_->LimitsOf(tenant) : TenantLimits{};
}

bool AccessControl::StillValid(std::string_view key_id) const {
  std::lock_guard lock(mu_);
  return keys_ && keys_->Knows(key_id);
}

AccessDecision AccessControl::Check(Access needed, std::string_view authorization,
                                    std::string_view source) {
  if (!enabled() || needed == Access::kOpen) return {};
  const auto now = std::chrono::steady_clock::now();
  const std::string address(Address(source));
  std::shared_ptr<const AccessKeys> keys;
  {
    std::lock_guard lock(mu_);
    auto it = failures_.find(address);
    if (it != failures_.end() && now - it->second.window_start > kWindow) {
      failures_.erase(it);
      it = failures_.end();
    }
    if (it != failures_.end() && it->second.count >= kFailuresPerMinute) {
      return {std::nullopt, 429,
              "too many failed key checks from this address; try again in a minute"};
    }
    keys = keys_;
  }
  const std::string_view key = BearerKey(authorization);
  std::optional<Caller> caller = keys->Find(key);
  if (!caller) {
    std::lock_guard lock(mu_);
    auto& failures = failures_[address];
    if (failures.count == 0) failures.window_start = now;
    ++failures.count;
    return {std::nullopt, 401,
            key.empty() ? "this server needs an API key: send Authorization: Bearer <key>"
                        : "the API key is not valid (unknown or revoked)"};
  }
  if (needed == Access::kOperator && caller->role != Role::kOperator) {
    return {caller, 403,
            "this route needs an operator's key; tenant '" + caller->tenant +
                "' may run programs and read its own usage"};
  }
  return {caller, 200, ""};
}

}  // namespace kc::server
