#include "server/tenancy/tenant_quotas.h"

#include <cmath>

namespace kc::server {

namespace {

std::string Seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

nlohmann::json Budget(double used, const std::optional<double>& limit) {
  nlohmann::json budget = {{"used", used}, {"limit", nullptr}, {"remaining", nullptr}};
  if (limit) {
    budget["limit"] = *limit;
    budget["remaining"] = std::max(*limit - used, 0.0);
  }
  return budget;
}

// The start of the epoch's window we are in, on the steady clock, and its index: one reading
// of each clock, so the two agree.
std::pair<Clock::time_point, int64_t> EpochWindow(std::chrono::seconds window) {
  using namespace std::chrono;
  const auto since_epoch = system_clock::now().time_since_epoch();
  const auto length = std::max(window, seconds(1));
  return {Clock::now() - duration_cast<Clock::duration>(since_epoch % length),
          since_epoch / length};
}

}  // namespace

TenantQuotas::TenantQuotas(std::chrono::seconds window)
    : TenantQuotas(window, EpochWindow(window)) {}

TenantQuotas::TenantQuotas(std::chrono::seconds window,
                           std::pair<Clock::time_point, int64_t> epoch_window)
    : TenantQuotas(window, epoch_window.first, epoch_window.second) {}

TenantQuotas::TenantQuotas(std::chrono::seconds window, Clock::time_point start,
                           int64_t first_window)
    : window_(std::max(window, std::chrono::seconds(1))),
      start_(start),
      first_window_(first_window) {}

int64_t TenantQuotas::WindowNow(Clock::time_point now) const {
  return first_window_ + (now - start_) / window_;
}

std::optional<RunUsage> TenantQuotas::SharedSums(const std::string& tenant,
                                                 const TenantLimits* limits,
                                                 Clock::time_point now) const {
  if (ledger_ == nullptr || tenant.empty()) return std::nullopt;
  if (limits != nullptr && !limits->gpu_seconds && !limits->cpu_seconds) return std::nullopt;
  return ledger_->Read(tenant, WindowNow(now));
}

int TenantQuotas::SecondsToWindowEnd(Clock::time_point now) const {
  const auto end = start_ + window_ * (WindowNow(now) - first_window_ + 1);
  return static_cast<int>(std::ceil(std::chrono::duration<double>(end - now).count()));
}

TenantQuotas::Account& TenantQuotas::Current(const std::string& tenant, Clock::time_point now) {
  Account& account = accounts_[tenant];
  if (const int64_t window = WindowNow(now); account.window != window) {
    account.window = window;
    account.gpu_seconds = account.cpu_seconds = 0;
  }
  return account;
}

std::optional<QuotaRefusal> TenantQuotas::Spent(const std::string& name,
                                                const std::optional<double>& limit, double used,
                                                const std::string& whose,
                                                Clock::time_point now) const {
  if (!limit || used < *limit) return std::nullopt;
  const int wait = SecondsToWindowEnd(now);
  return QuotaRefusal{name,
                      whose + " limit " + name + "=" + Seconds(*limit) + " per " +
                          std::to_string(window_.count()) + " s window is spent (" + Seconds(used) +
                          " s used); it frees in " + std::to_string(wait) + " s",
                      wait};
}

std::optional<QuotaRefusal> TenantQuotas::Enter(const std::string& tenant,
                                                const TenantLimits& limits, int queued) {
  const auto now = Clock::now();
  const std::optional<RunUsage> cluster = SharedSums(tenant, &limits, now);  // not under mu_
  std::lock_guard lock(mu_);
  Account& account = Current(tenant, now);
  const std::string whose = tenant.empty() ? "this server's" : "tenant '" + tenant + "'";
  std::optional<QuotaRefusal> refusal;
  if (limits.in_flight && account.reading.in_flight >= *limits.in_flight) {
    refusal = QuotaRefusal{"in_flight",
                           whose + " limit in_flight=" + std::to_string(*limits.in_flight) +
                               " is reached; it frees when one of those requests is answered",
                           1};
  } else if (limits.queued && queued >= *limits.queued) {
    refusal = QuotaRefusal{"queued",
                           whose + " limit queued=" + std::to_string(*limits.queued) +
                               " is reached; it frees when one of them takes a seat",
                           1};
  } else {
    const RunUsage used{std::max(account.gpu_seconds, cluster ? cluster->gpu_seconds : 0),
                        std::max(account.cpu_seconds, cluster ? cluster->cpu_seconds : 0)};
    refusal = Spent("gpu_seconds", limits.gpu_seconds, used.gpu_seconds, whose, now);
    if (!refusal) refusal = Spent("cpu_seconds", limits.cpu_seconds, used.cpu_seconds, whose, now);
  }
  if (refusal) {
    ++account.reading.refused[refusal->limit];
    return refusal;
  }
  ++account.reading.in_flight;
  ++account.reading.requests;
  return std::nullopt;
}

void TenantQuotas::Leave(const std::string& tenant) {
  std::lock_guard lock(mu_);
  --accounts_[tenant].reading.in_flight;
}

void TenantQuotas::Charge(const std::string& tenant, const RunUsage& used) {
  const auto now = Clock::now();
  {
    std::lock_guard lock(mu_);
    Account& account = Current(tenant, now);
    account.gpu_seconds += used.gpu_seconds;
    account.cpu_seconds += used.cpu_seconds;
    account.reading.gpu_seconds_total += used.gpu_seconds;
    account.reading.cpu_seconds_total += used.cpu_seconds;
  }
  if (ledger_ != nullptr && !tenant.empty()) ledger_->Add(tenant, WindowNow(now), used);
}

nlohmann::json TenantQuotas::Usage(const std::string& tenant, const TenantLimits& limits) const {
  const auto now = Clock::now();
  const std::optional<RunUsage> cluster = SharedSums(tenant, nullptr, now);
  std::lock_guard lock(mu_);
  Account account;
  if (auto it = accounts_.find(tenant); it != accounts_.end()) account = it->second;
  if (account.window != WindowNow(now)) account.gpu_seconds = account.cpu_seconds = 0;
  if (cluster) {  // the window's seconds are the cluster's; the totals stay this node's
    account.gpu_seconds = std::max(account.gpu_seconds, cluster->gpu_seconds);
    account.cpu_seconds = std::max(account.cpu_seconds, cluster->cpu_seconds);
  }
  auto optional = [](const auto& value) -> nlohmann::json {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  return {
      {"tenant", tenant},
      {"window_seconds", window_.count()},
      {"window_ends_in_seconds", SecondsToWindowEnd(now)},
      {"in_flight", {{"used", account.reading.in_flight}, {"limit", optional(limits.in_flight)}}},
      {"queued_limit", optional(limits.queued)},
      {"gpu_seconds", Budget(account.gpu_seconds, limits.gpu_seconds)},
      {"cpu_seconds", Budget(account.cpu_seconds, limits.cpu_seconds)},
      {"max_request_bytes", optional(limits.max_request_bytes)},
      {"gpu_count", optional(limits.gpu_count)},
      {"weight", limits.weight},
      {"requests", account.reading.requests},
      {"refused", account.reading.refused},
      {"gpu_seconds_total", account.reading.gpu_seconds_total},
      {"cpu_seconds_total", account.reading.cpu_seconds_total}};
}

std::map<std::string, TenantQuotas::Reading> TenantQuotas::Readings() const {
  std::map<std::string, Reading> readings;
  std::lock_guard lock(mu_);
  for (const auto& [tenant, account] : accounts_)
    readings[tenant] = account.reading;
  return readings;
}

}  // namespace kc::server
