// AccessKeys: who may call this server (docs/deploy.md "Keys and roles", issue 27). The file of
// --auth-keys holds one line per key: the tenant, the key's SHA-256 (never the key) and a
// role; blank lines and lines starting with # are skipped:
//
//   # tenant   sha256 of the key                                                  role
//   alice      3f0a...64 hex...                                                   tenant
//   ops        9b1c...64 hex...                                                   operator
//
// Lines starting with `limits` set a tenant's quotas and weight (tenant_limits.h).
// Two keys of one tenant (during a rotation) are one tenant. A request presents its key as
// "Authorization: Bearer <key>"; the key is hashed and compared with every line in time that
// does not depend on where they differ. `kcoral keys new TENANT` makes a key and its line.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "server/tenancy/tenant_limits.h"

namespace kc::server {

enum class Role { kTenant, kOperator };

struct Caller {
  std::string tenant;
  Role role = Role::kTenant;
  std::string key_id;  // the first 16 hex digits of the key's SHA-256: which key, never the key
};

class AccessKeys {
 public:
  // Parses the file; kInvalidArgument naming the file, line and problem (never a key).
  static StatusOr<AccessKeys> Load(const std::filesystem::path& file);
  static StatusOr<AccessKeys> Parse(std::string_view text, std::string_view name);

  // The caller a presented key belongs to, if any.
  std::optional<Caller> Find(std::string_view key) const;
  // Whether a key of this id is still in the file (SIGHUP revokes the others).
  bool Knows(std::string_view key_id) const;
  // The tenant's limits line, else the `limits *` line, else no limits.
  const TenantLimits& LimitsOf(const std::string& tenant) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string sha256;
    Caller caller;
  };
  std::vector<Entry> entries_;
  std::map<std::string, TenantLimits> limits_;  // by tenant; "*" for the others
};

// The key of an "Authorization: Bearer <key>" header, or empty.
std::string_view BearerKey(std::string_view authorization);

}  // namespace kc::server
