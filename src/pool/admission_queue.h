// AdmissionQueue: the bounded FIFO of requests waiting for a seat.
//
// Thread-safe. Past `capacity` a push is refused (the server answers 503
// busy). A job that waits past its deadline, or that is still queued when
// shutdown begins, is handed back through `on_expired` (503 busy as well).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/clock.h"

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
    jobs_.push_back(std::move(job));
    cv_.notify_all();
    return true;
  }

  // Blocks until a job arrives; nullptr once closed.
  std::shared_ptr<Job> Pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
    if (jobs_.empty()) return nullptr;
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    cv_.notify_all();
    return job;
  }

  // Refuses new jobs and expires the waiting ones; Pop returns nullptr.
  void Close() {
    std::deque<std::shared_ptr<Job>> expired;
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      closed_ = true;
      expired.swap(jobs_);
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
  // FIFO with one timeout for all: the front always has the earliest deadline.
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
      lock.unlock();
      on_expired_(job);
      lock.lock();
    }
  }

  const size_t capacity_;
  const Expired on_expired_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;  // guarded by mu_
  bool closed_ = false;                    // guarded by mu_
  std::thread janitor_;                    // started last: uses the members above
};

}  // namespace kc::pool
