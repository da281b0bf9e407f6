// TenantQuotas: each tenant's use of this server against its limits (tenant_limits.h;
// issue 27, docs/deploy.md "Quotas and fair share").
//
// Budgets are checked at admission and charged after the run, so a request never dies for
// quota: a tenant can overdraw a window by what its running requests use, each bounded by its
// own timeout. GPU seconds are lease time; CPU seconds are seat time off the lease (compiles,
// cpu_only runs, and everything on a CPU server). Windows are fixed, --quota-window-seconds
// long and counted from the Unix epoch, so the nodes of a cluster name the same ones; a refusal
// for a spent budget says when the window ends. In a cluster the seconds are also summed over
// its nodes (SharedLedger: cluster/usage_ledger.h), and the budgets are checked against the
// larger of this node's sums and the cluster's. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "server/tenancy/tenant_limits.h"

namespace kc::server {

// What one run used, for its tenant's budgets: GPU seconds are its lease time, CPU seconds
// its seat time off the lease.
struct RunUsage {
  double gpu_seconds = 0, cpu_seconds = 0;
};

struct QuotaRefusal {
  std::string limit;    // in_flight, queued, gpu_seconds, cpu_seconds
  std::string message;  // names the limit and when it frees
  int retry_after_seconds = 1;
};

class TenantQuotas {
 public:
  // The seconds of each tenant and window, summed over a cluster's nodes.
  class SharedLedger {
   public:
    virtual ~SharedLedger() = default;
    virtual void Add(const std::string& tenant, int64_t window, const RunUsage& used) = 0;
    // nullopt where the cluster cannot say now: this node's own sums stand.
    virtual std::optional<RunUsage> Read(const std::string& tenant, int64_t window) = 0;
  };

  // Windows from the Unix epoch.
  explicit TenantQuotas(std::chrono::seconds window);
  // Window `first_window` began at `start` (tests).
  TenantQuotas(std::chrono::seconds window, Clock::time_point start, int64_t first_window = 0);

  // Before any request; `ledger` outlives this.
  void Share(SharedLedger* ledger) { ledger_ = ledger; }

  // Admits a request of `tenant`, with `queued` of its requests waiting for a seat now, and
  // counts it in flight until Leave; or says which limit refuses it.
  std::optional<QuotaRefusal> Enter(const std::string& tenant, const TenantLimits& limits,
                                    int queued);
  void Leave(const std::string& tenant);
  // What a run used, charged to the window it ended in.
  void Charge(const std::string& tenant, const RunUsage& used);

  // {"tenant", "window_seconds", "window_ends_in_seconds", "in_flight", "requests", "refused",
  //  "gpu_seconds": {"used", "limit", "remaining"}, "cpu_seconds": {...}, totals}
  nlohmann::json Usage(const std::string& tenant, const TenantLimits& limits) const;

  struct Reading {
    int64_t in_flight = 0;
    uint64_t requests = 0;
    std::map<std::string, uint64_t> refused;  // by limit
    double gpu_seconds_total = 0, cpu_seconds_total = 0;
  };
  std::map<std::string, Reading> Readings() const;

 private:
  // The current epoch window's start and index, read once (the public constructor).
  TenantQuotas(std::chrono::seconds window, std::pair<Clock::time_point, int64_t> epoch_window);

  struct Account {
    Reading reading;
    int64_t window = -1;  // the window index gpu/cpu_seconds belong to
    double gpu_seconds = 0, cpu_seconds = 0;
  };
  int64_t WindowNow(Clock::time_point now) const;
  // The cluster's sums of `tenant` now, where it has a ledger and `limits` a seconds budget.
  std::optional<RunUsage> SharedSums(const std::string& tenant, const TenantLimits* limits,
                                     Clock::time_point now) const;
  Account& Current(const std::string& tenant, Clock::time_point now);  // mu_ held
  int SecondsToWindowEnd(Clock::time_point now) const;
  // The refusal for a budget of `name` that `used` has spent, if it has.
  std::optional<QuotaRefusal> Spent(const std::string& name, const std::optional<double>& limit,
                                    double used, const std::string& whose,
                                    Clock::time_point now) const;

  const std::chrono::seconds window_;
  const Clock::time_point start_;
  const int64_t first_window_;
  SharedLedger* ledger_ = nullptr;
  mutable std::mutex mu_;
  std::map<std::string, Account> accounts_;  // mu_
};

}  // namespace kc::server
