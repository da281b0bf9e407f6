// AdmissionQueue: the bounded queue of requests waiting for a seat, served by weighted fair
// share across tenants (fair_share.h: a Job has a TenantShare `share`; one tenant is FIFO).
// The seat that ran a job charges its time back (Charge).
//
// On a GPU the seats are not what tenants share: the GPU lease is, and the lease's queue shares
// it by weight (gpu_arbiter.h) among the requests that hold a seat. So a GPU's seats
// (SeatGroup::spread) go to the waiting tenant that holds the fewest of them, which keeps every
// busy tenant a request in the lease's queue, and from kSpareFrom seats on one seat is kept for
// a tenant that holds none: a newcomer beside a flood waits for the lease, never for a seat
// (with keys only: without them everyone is one tenant).
//
// Thread-safe. Past `capacity` a push is refused (the server answers 503
// busy). A job that waits past its deadline, or that is still queued when
// shutdown begins, is handed back through `on_expired` (503 busy as well).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "pool/fair_share.h"

namespace kc::pool {

template <typename Job>
class AdmissionQueue {
 public:
  using Expired = std::function<void(std::shared_ptr<Job>)>;

  AdmissionQueue(size_t capacity, Expired on_expired)
      : capacity_(capacity),
        on_expired_(std::move(on_expired)),
        janitor_([this] { ExpireLoop(); }) {}

  ~AdmissionQueue() {
    Close();
    janitor_.join();
  }

  // False when the queue is full or closed.
  bool Push(std::shared_ptr<Job> job) {
    std::lock_guard lock(mu_);
    if (closed_ || jobs_.size() >= capacity_) return false;
    share_.Arrive(job->share.tenant);
    jobs_.push_back(std::move(job));
    cv_.notify_all();
    return true;
  }

  // The seats a Pop fills: one device's.
  struct SeatGroup {
    std::string name;
    int seats = 1;
    bool spread = false;  // a GPU's (see above)
  };
  static constexpr int kSpareFrom = 4;

  // Blocks until a job for a seat of `group` is waiting; nullptr once closed. The first job of
  // the tenant with the least virtual time (fair_share.h); on a GPU, of the tenant with the
  // fewest of its seats first.
  std::shared_ptr<Job> Pop(const SeatGroup& group = {}) {
    std::unique_lock lock(mu_);
    auto next = jobs_.end();
    cv_.wait(lock, [&] { return closed_ || (next = Next(group)) != jobs_.end(); });
    if (closed_) return nullptr;
    auto job = std::move(*next);
    jobs_.erase(next);
    share_.Grant(job->share.tenant);
    ++seated_[group.name][job->share.tenant];
    cv_.notify_all();
    return job;
  }

  // A seat of `group` held `job` for `seconds`, and is free again.
  void Charge(const Job& job, double seconds, const SeatGroup& group = {}) {
    std::lock_guard lock(mu_);
    share_.Charge(job.share.tenant, job.share.weight, seconds);
    auto& seated = seated_[group.name];
    if (auto it = seated.find(job.share.tenant); it != seated.end() && --it->second == 0)
      seated.erase(it);
    cv_.notify_all();  // a spread group's choice may change
  }

  // Takes out every waiting job `drop` picks (a revoked key's, say).
  std::vector<std::shared_ptr<Job>> TakeIf(const std::function<bool(const Job&)>& drop) {
    std::vector<std::shared_ptr<Job>> taken;
    std::lock_guard lock(mu_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (!drop(**it)) {
        ++it;
        continue;
      }
      share_.Leave((*it)->share.tenant);
      taken.push_back(std::move(*it));
      it = jobs_.erase(it);
    }
    return taken;
  }

  // Waiting jobs by tenant.
  std::map<std::string, int> WaitingByTenant() const {
    std::map<std::string, int> by_tenant;
    std::lock_guard lock(mu_);
    for (const auto& job : jobs_)
      ++by_tenant[job->share.tenant];
    return by_tenant;
  }

  // Refuses new jobs and expires the waiting ones; Pop returns nullptr.
  void Close() {
    std::deque<std::shared_ptr<Job>> expired;
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      closed_ = true;
      expired.swap(jobs_);
      for (const auto& job : expired)
        share_.Leave(job->share.tenant);
      cv_.notify_all();
    }
    for (auto& job : expired)
      on_expired_(job);
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }

 private:
  // The job a seat of `group` takes now, or jobs_.end(); mu_ held.
  typename std::deque<std::shared_ptr<Job>>::iterator Next(const SeatGroup& group) {
    const std::map<std::string, int>& seated = seated_[group.name];
    auto held = [&](const std::string& tenant) {
      auto it = seated.find(tenant);
      return it == seated.end() ? 0 : it->second;
    };
    int taken = 0;
    for (const auto& [tenant, count] : seated)
      taken += count;
    const bool keep_spare = group.spread && group.seats >= kSpareFrom;
    auto next = jobs_.end();
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      const std::string& tenant = (*it)->share.tenant;
      // The spare; without keys everyone is one tenant (""), and no newcomer needs it.
      if (keep_spare && !tenant.empty() && held(tenant) > 0 && group.seats - taken < 2) continue;
      if (next == jobs_.end()) {
        next = it;
        continue;
      }
      const std::string& best = (*next)->share.tenant;
      if (group.spread && held(tenant) != held(best)) {
        if (held(tenant) < held(best)) next = it;
      } else if (share_.VirtualTime(tenant) < share_.VirtualTime(best)) {
        next = it;
      }
    }
    return next;
  }

  // One timeout for all, and jobs_ in arrival order: the front has the earliest deadline.
  void ExpireLoop() {
    std::unique_lock lock(mu_);
    while (!closed_) {
      if (jobs_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto deadline = jobs_.front()->wait_deadline;
      if (Clock::now() < deadline) {
        cv_.wait_until(lock, deadline);
        continue;
      }
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      share_.Leave(job->share.tenant);
      lock.unlock();
      on_expired_(job);
      lock.lock();
    }
  }

  const size_t capacity_;
  const Expired on_expired_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // guarded by mu_; in arrival order
  FairShare share_;                        // guarded by mu_
  // Seats held, by group and tenant; guarded by mu_.
  std::map<std::string, std::map<std::string, int>> seated_;
  bool closed_ = false;  // guarded by mu_
  std::thread janitor_;  // started last: uses the members above
};

}  // namespace kc::pool
