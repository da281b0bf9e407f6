// AccessControl: the keys check in front of every route (docs/deploy.md "Keys and roles",
// issue 27). Without --auth-keys everything is open, as always. With it:
//   GET /health                 open;
//   /execute, /blobs            a tenant's or an operator's key;
//   GET /metrics                an operator's key;
//   /cluster/...                the cluster's own secret instead (cluster/peer_auth.h).
// A missing or unknown key is 401 "unauthorized", a route the role may not use 403; neither
// message echoes the key. A source address with more than kFailuresPerMinute failed attempts
// in a minute gets 429 until the minute has passed, whatever it presents. SIGHUP reloads the
// file (Reload); a file that does not parse keeps the old keys, and says why.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "server/tenancy/access_keys.h"

namespace kc::server {

enum class Access { kOpen, kTenant, kOperator };

struct AccessDecision {
  std::optional<Caller> caller;  // set when allowed with a key
  int status = 200;              // 200: allowed; else 401, 403 or 429
  std::string message;           // why not
};

class AccessControl {
 public:
  static constexpr int kFailuresPerMinute = 20;

  // No file: everything is open.
  AccessControl() = default;
  static StatusOr<std::unique_ptr<AccessControl>> Load(const std::filesystem::path& file);

  bool enabled() const { return !file_.empty(); }
  AccessDecision Check(Access needed, std::string_view authorization, std::string_view source);
  // Reads the file again; on error the old keys stay.
  Status Reload();
  size_t key_count() const;
  // The tenant's limits (tenant_limits.h); none without keys.
  TenantLimits LimitsOf(const std::string& tenant) const;
  // Whether the key of this id (Caller::key_id) is still in the file.
  bool StillValid(std::string_view key_id) const;

 private:
  std::filesystem::path file_;
  mutable std::mutex mu_;
  std::shared_ptr<const AccessKeys> keys_;  // mu_
  struct Failures {
    std::chrono::steady_clock::time_point window_start;
    int count = 0;
  };
  std::unordered_map<std::string, Failures> failures_;  // mu_, by source address
};

}  // namespace kc::server
