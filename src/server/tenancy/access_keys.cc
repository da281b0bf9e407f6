#include "server/tenancy/access_keys.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "base/hmac_sha256.h"
#include "base/sha256.h"

namespace kc::server {

namespace {

// A tenant's name is a NATS subject token in a cluster (kcoral.work.<pool>.<tenant>) and a
// Prometheus label: plain characters only.
bool SubjectSafe(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

}  // namespace

StatusOr<AccessKeys> AccessKeys::Load(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return InvalidArgumentError("--auth-keys " + file.string() + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), file.string());
}

StatusOr<AccessKeys> AccessKeys::Parse(std::string_view text, std::string_view name) {
  AccessKeys keys;
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::istringstream fields(line);
    std::string tenant, sha256, role, extra;
    if (!(fields >> tenant) || tenant.starts_with("#")) continue;
    auto bad = [&](const std::string& what) {
      return InvalidArgumentError("--auth-keys " + std::string(name) + " line " +
                                  std::to_string(number) + ": " + what);
    };
    if (tenant == "limits") {
      std::string whose, field;
      if (!(fields >> whose)) return bad("expected: limits TENANT name=value ...");
      std::vector<std::string> settings;
      while (fields >> field && !field.starts_with("#"))
        settings.push_back(field);
      auto limits = ParseTenantLimits(settings);
      if (!limits.ok()) return bad(limits.status().message());
      if (!keys.limits_.emplace(whose, *limits).second) {
        return bad("a second limits line for '" + whose + "'");
      }
      continue;
    }
    if (!(fields >> sha256 >> role) || (fields >> extra)) {
      return bad("expected three fields: tenant, the key's sha256, role");
    }
    if (!IsSha256Hex(sha256)) {
      return bad(
          "the second field must be the key's SHA-256 (64 lowercase hex characters), "
          "never the key itself");
    }
    if (!SubjectSafe(tenant)) {
      return bad("a tenant's name is 1-64 letters, digits, '_' or '-', not '" + tenant + "'");
    }
    if (role != "tenant" && role != "operator") {
      return bad("role must be tenant or operator, not '" + role + "'");
    }
    for (const Entry& entry : keys.entries_) {
      if (entry.sha256 == sha256) return bad("this key is listed twice");
    }
    keys.entries_.push_back(
        {sha256,
         {tenant, role == "operator" ? Role::kOperator : Role::kTenant, sha256.substr(0, 16)}});
  }
  if (keys.entries_.empty()) {
    return InvalidArgumentError("--auth-keys " + std::string(name) +
                                ": no key (every request would be refused)");
  }
  return keys;
}

std::optional<Caller> AccessKeys::Find(std::string_view key) const {
  if (key.empty()) return std::nullopt;
  const std::string presented = Sha256Hex(key);
  std::optional<Caller> found;
  for (const Entry& entry : entries_) {  // every line, whatever matched: no early exit
    if (ConstantTimeEquals(presented, entry.sha256)) found = entry.caller;
  }
  return found;
}

bool AccessKeys::Knows(std::string_view key_id) const {
  for (const Entry& entry : entries_) {
    if (entry.caller.key_id == key_id) return true;
  }
  return false;
}

const TenantLimits& AccessKeys::LimitsOf(const std::string& tenant) const {
  static const TenantLimits kNone;
  auto it = limits_.find(tenant);
  if (it == limits_.end()) it = limits_.find("*");
  return it == limits_.end() ? kNone : it->second;
}

std::string_view BearerKey(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.starts_with(kBearer)) return {};
  std::string_view key = authorization.substr(kBearer.size());
  while (!key.empty() && key.back() == ' ')
    key.remove_suffix(1);
  return key;
}

}  // namespace kc::server
