#include "cluster/usage_ledger.h"

#include <nlohmann/json.hpp>

namespace kc::cluster {

namespace {

constexpr int kAttempts = 16;  // compare-and-set races lost before giving up

std::string Key(const std::string& tenant, int64_t window) {
  return tenant + ".w" + std::to_string(window);
}

UsageSums Parse(kvEntry* entry) {
  const auto sums = nlohmann::json::parse(
      std::string(kvEntry_ValueString(entry), static_cast<size_t>(kvEntry_ValueLen(entry))),
      nullptr, false);
  if (!sums.is_object()) return {};
  return {sums.value("gpu_seconds", 0.0), sums.value("cpu_seconds", 0.0)};
}

std::string Text(const UsageSums& sums) {
  return nlohmann::json{{"gpu_seconds", sums.gpu_seconds}, {"cpu_seconds", sums.cpu_seconds}}
      .dump();
}

}  // namespace

StatusOr<std::unique_ptr<UsageLedger>> UsageLedger::Open(NatsLink& link, std::chrono::seconds ttl) {
  KC_ASSIGN_OR_RETURN(kvStore * bucket, link.Bucket("kcoral_usage", ttl));
  return std::unique_ptr<UsageLedger>(new UsageLedger(bucket));
}

Status UsageLedger::Add(const std::string& tenant, int64_t window, const UsageSums& used) {
  const std::string key = Key(tenant, window);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    kvEntry* entry = nullptr;
    natsStatus s = kvStore_Get(&entry, bucket_, key.c_str());
    uint64_t revision = 0;
    if (s == NATS_NOT_FOUND) {
      s = kvStore_CreateString(&revision, bucket_, key.c_str(), Text(used).c_str());
    } else if (s == NATS_OK) {
      UsageSums sums = Parse(entry);
      const uint64_t last = kvEntry_Revision(entry);
      kvEntry_Destroy(entry);
      sums.gpu_seconds += used.gpu_seconds;
      sums.cpu_seconds += used.cpu_seconds;
      s = kvStore_UpdateString(&revision, bucket_, key.c_str(), Text(sums).c_str(), last);
    } else {
      return UnavailableError("reading " + key + " in kcoral_usage: " + NatsError(s));
    }
    if (s == NATS_OK) return Status::Ok();
    // Another node wrote first ("wrong last sequence"): read again and add to its sums.
  }
  return UnavailableError("charging " + key + " in kcoral_usage: " + std::to_string(kAttempts) +
                          " other nodes' charges came first");
}

StatusOr<UsageSums> UsageLedger::Sums(const std::string& tenant, int64_t window) const {
  const std::string key = Key(tenant, window);
  kvEntry* entry = nullptr;
  const natsStatus s = kvStore_Get(&entry, bucket_, key.c_str());
  if (s == NATS_NOT_FOUND) return UsageSums{};
  if (s != NATS_OK) return UnavailableError("reading " + key + " in kcoral_usage: " + NatsError(s));
  UsageSums sums = Parse(entry);
  kvEntry_Destroy(entry);
  return sums;
}

}  // namespace kc::cluster
