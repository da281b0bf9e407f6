#include "pool/gpu_lease.h"

namespace kc::pool {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void GpuLease::Acquire(const std::string& holder) {
  std::unique_lock lock(mu_);
  const uint64_t ticket = next_ticket_++;
  waiters_.push_back(ticket);
  cv_.wait(lock, [&] { return !held_ && waiters_.front() == ticket; });
  waiters_.pop_front();
  held_ = true;
  holder_ = holder;
  held_since_ns_ = SteadyNowNs();
}

void GpuLease::Release() {
  std::lock_guard lock(mu_);
  if (!held_) return;
  history_.push_back({held_since_ns_, SteadyNowNs(), holder_});
  if (history_.size() > kHistory) history_.pop_front();
  held_ = false;
  holder_.clear();
  cv_.notify_all();
}

std::optional<std::string> GpuLease::HolderAt(int64_t when_ns) const {
  std::lock_guard lock(mu_);
  if (held_ && when_ns >= held_since_ns_) return holder_;
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (when_ns >= it->start_ns && when_ns <= it->end_ns) return it->holder;
  }
  return std::nullopt;
}

std::vector<std::string> GpuLease::HoldersBetween(int64_t from_ns, int64_t to_ns) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> holders;
  for (const Tenure& tenure : history_) {
    if (tenure.end_ns >= from_ns && tenure.start_ns <= to_ns) holders.push_back(tenure.holder);
  }
  if (held_ && held_since_ns_ <= to_ns) holders.push_back(holder_);
  return holders;
}

int GpuLease::depth() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(waiters_.size()) + (held_ ? 1 : 0);
}

}  // namespace kc::pool
