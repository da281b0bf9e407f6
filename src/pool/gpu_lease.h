// GpuLease: one holder's claim on a fixed set of GPUs, taken and given back
// whole through the server's GpuArbiter (gpu_arbiter.h): one GPU for the
// workers of a seat's device, several for a reserved multi-GPU job. The
// arbiter lives in the server, so a killed worker cannot leak a lease.
//
// Thread-safe; one holder at a time. Usage:
//   lease.Acquire("req-1");   // blocks until every GPU of the set is granted
//   ...                       // exclusive use of those GPUs
//   lease.Release();
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pool/gpu_arbiter.h"

namespace kc::pool {

class GpuLease {
 public:
  GpuLease(GpuArbiter& arbiter, std::vector<int> gpus)
      : arbiter_(arbiter), gpus_(std::move(gpus)) {}

  void Acquire(const std::string& holder, const TenantShare& share = {}) {
    arbiter_.Acquire(gpus_, holder, {}, share);
  }
  // False, holding nothing, if `give_up` turned true while waiting.
  bool AcquireUnless(const std::string& holder, const std::function<bool()>& give_up,
                     const TenantShare& share = {}) {
    return arbiter_.Acquire(gpus_, holder, give_up, share);
  }
  void Release() { arbiter_.Release(gpus_); }
  // A span on the set's GPUs (gpu_arbiter.h); EndSpan returns the house-keeping
  // jobs that overlapped it.
  GpuArbiter::SpanStart BeginSpan(GpuArbiter::SpanKind kind = GpuArbiter::SpanKind::kTiming) {
    return arbiter_.BeginSpan(gpus_, kind);
  }
  uint64_t EndSpan(const GpuArbiter::SpanStart& start) { return arbiter_.EndSpan(gpus_, start); }

  // Who held any GPU of the set at `when_ns` (NowNs(), base/clock.h; the first GPU that was
  // held).
  std::optional<std::string> HolderAt(int64_t when_ns) const;
  // Everyone who held a GPU of the set in [from_ns, to_ns], in order, once each.
  std::vector<std::string> HoldersBetween(int64_t from_ns, int64_t to_ns) const;

  const std::vector<int>& gpus() const { return gpus_; }
  // Holder plus waiters, on the busiest GPU of the set.
  int depth() const;

 private:
  GpuArbiter& arbiter_;
  const std::vector<int> gpus_;
};

}  // namespace kc::pool
