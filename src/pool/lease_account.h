// LeaseAccount: one holder's use of a GpuLease, measured by the server: how long it waited,
// who held the GPUs meanwhile, how long it held them. Both ways a run holds GPUs use it: a
// seat's shared lease, taken and given back on the worker's lease frames (run_session.h), and
// a reserved job's GPUs, held for the worker's whole life (reserved_gpu_job.h).
//
// Not thread-safe: the thread of the run that owns it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "pool/gpu_lease.h"

namespace kc::pool {

class LeaseAccount {
 public:
  LeaseAccount(GpuLease& lease, std::string holder, TenantShare share = {})
      : lease_(lease), holder_(std::move(holder)), share_(std::move(share)) {}
  // Whatever ended the run, the lease goes back.
  ~LeaseAccount() { Release(); }
  LeaseAccount(const LeaseAccount&) = delete;
  LeaseAccount& operator=(const LeaseAccount&) = delete;

  // Blocks until the lease is ours; false, holding nothing, if `give_up` turned true first.
  // Returns at once while held. The wait is added to wait_ms(), the holders met to waited_for().
  bool Acquire(const std::function<bool()>& give_up = nullptr);
  // Gives the lease back; its holding time is added to held_ms(). A no-op when not held.
  void Release();

  bool held() const { return held_; }
  double wait_ms() const { return wait_ms_; }
  double held_ms() const { return held_ms_; }
  // The time of the last wait (the run's deadline moves by it: lease waits never count).
  Clock::duration last_wait() const { return last_wait_; }
  // Who held the lease while this holder waited, in order, this holder left out.
  std::vector<std::string>& waited_for() { return waited_for_; }
  GpuLease& lease() { return lease_; }

 private:
  GpuLease& lease_;
  const std::string holder_;
  const TenantShare share_;
  bool held_ = false;
  Clock::time_point held_since_;
  Clock::duration last_wait_{};
  double wait_ms_ = 0;
  double held_ms_ = 0;
  std::vector<std::string> waited_for_;
};

}  // namespace kc::pool
