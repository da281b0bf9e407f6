#include "pool/gpu_arbiter.h"

#include <algorithm>
#include <chrono>

namespace kc::pool {

GpuArbiter::GpuArbiter(const std::vector<int>& gpu_indices, HousekeepingPolicy policy)
    : policy_(policy) {
  const int64_t now = NowNs();
  for (int index : gpu_indices)
    gpus_.try_emplace(index, now);
}

const GpuArbiter::Gpu& GpuArbiter::At(int gpu) const {
  auto it = gpus_.find(gpu);
  KC_CHECK(it != gpus_.end());  // a GPU this server does not have: a bug in the caller
  return it->second;
}

bool GpuArbiter::Before(uint64_t ticket, uint64_t other) const {
  const double mine = share_.VirtualTime(waiting_tenants_.at(ticket));
  const double theirs = share_.VirtualTime(waiting_tenants_.at(other));
  return mine < theirs || (mine == theirs && ticket < other);
}

bool GpuArbiter::Grantable(const std::vector<int>& gpus, uint64_t ticket) const {
  return std::all_of(gpus.begin(), gpus.end(), [&](int index) {
    const Gpu& gpu = At(index);
    if (gpu.held) return false;
    return std::none_of(gpu.waiters.begin(), gpu.waiters.end(),
                        [&](uint64_t other) { return other != ticket && Before(other, ticket); });
  });
}

bool GpuArbiter::Acquire(const std::vector<int>& gpus, const std::string& holder,
                         const std::function<bool()>& give_up, const TenantShare& share) {
  std::unique_lock lock(mu_);
  for (int index : gpus)
    At(index);  // checks that it exists
  const uint64_t ticket = next_ticket_++;
  for (int index : gpus)
    gpus_.at(index).waiters.push_back(ticket);
  waiting_tenants_[ticket] = share.tenant;
  share_.Arrive(share.tenant);
  auto leave_queues = [&] {
    for (int index : gpus) {
      auto& waiters = gpus_.at(index).waiters;
      waiters.erase(std::find(waiters.begin(), waiters.end(), ticket));
    }
    waiting_tenants_.erase(ticket);
    cv_.notify_all();  // whoever queued behind us may be at the front now
  };
  while (!Grantable(gpus, ticket)) {
    if (!give_up) {
      cv_.wait(lock);
    } else if (cv_.wait_for(lock, std::chrono::milliseconds(50)) == std::cv_status::timeout &&
               give_up()) {
      share_.Leave(share.tenant);
      leave_queues();
      return false;
    }
  }
  share_.Grant(share.tenant);
  leave_queues();
  const int64_t now = NowNs();
  for (int index : gpus) {
    Gpu& gpu = gpus_.at(index);
    gpu.held = true;
    gpu.holder = holder;
    gpu.holder_share = share;
    gpu.held_since_ns = now;
  }
  return true;
}

void GpuArbiter::Release(const std::vector<int>& gpus) {
  std::lock_guard lock(mu_);
  const int64_t now = NowNs();
  for (int index : gpus) {
    Gpu& gpu = gpus_.at(index);
    if (!gpu.held) continue;
    gpu.history.push_back({gpu.held_since_ns, now, gpu.holder});
    gpu.held_closed_ns += now - gpu.held_since_ns;
    if (gpu.history.size() > kHistory) gpu.history.pop_front();
    share_.Charge(gpu.holder_share.tenant, gpu.holder_share.weight,
                  static_cast<double>(now - gpu.held_since_ns) / 1e9);
    gpu.held = false;
    gpu.holder.clear();
  }
  cv_.notify_all();
}

StatusOr<std::vector<int>> GpuArbiter::Choose(int count) const {
  if (count < 1 || count > static_cast<int>(gpus_.size())) {
    return InvalidArgumentError("gpu_count " + std::to_string(count) + " exceeds the " +
                                std::to_string(gpus_.size()) + " GPU(s) of this server");
  }
  std::lock_guard lock(mu_);
  std::vector<std::pair<int, int>> by_load;  // (depth, index)
  for (const auto& [index, gpu] : gpus_)
    by_load.emplace_back(static_cast<int>(gpu.waiters.size()) + (gpu.held ? 1 : 0), index);
  std::sort(by_load.begin(), by_load.end());
  std::vector<int> chosen;
  for (int i = 0; i < count; ++i)
    chosen.push_back(by_load[i].second);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

std::optional<std::string> GpuArbiter::HolderAt(int index, int64_t when_ns) const {
  std::lock_guard lock(mu_);
  const Gpu& gpu = At(index);
  if (gpu.held && when_ns >= gpu.held_since_ns) return gpu.holder;
  for (auto it = gpu.history.rbegin(); it != gpu.history.rend(); ++it) {
    if (when_ns >= it->start_ns && when_ns <= it->end_ns) return it->holder;
  }
  return std::nullopt;
}

std::vector<std::string> GpuArbiter::HoldersBetween(int index, int64_t from_ns,
                                                    int64_t to_ns) const {
  std::lock_guard lock(mu_);
  const Gpu& gpu = At(index);
  std::vector<std::string> holders;
  for (const Tenure& tenure : gpu.history) {
    if (tenure.end_ns >= from_ns && tenure.start_ns <= to_ns) holders.push_back(tenure.holder);
  }
  if (gpu.held && gpu.held_since_ns <= to_ns) holders.push_back(gpu.holder);
  return holders;
}

bool GpuArbiter::HousekeepingOverdue(const Gpu& gpu, size_t kind, int64_t now_ns) const {
  const auto& waits = gpu.housekeeping_waits[kind];
  return !waits.empty() &&
         now_ns - *waits.begin() >= std::chrono::nanoseconds(kHousekeepingPatience).count();
}

int GpuArbiter::RunningHousekeeping(const Gpu& gpu) {
  int running = 0;
  for (int count : gpu.housekeeping)
    running += count;
  return running;
}

bool GpuArbiter::Excludes(SpanKind span, HousekeepingKind job) const {
  if (span == SpanKind::kReservation) return true;  // its GPUs are its own
  switch (policy_) {
    case HousekeepingPolicy::kOutsideSpans:
      return true;
    case HousekeepingPolicy::kContextsBesideSpans:
      return job == HousekeepingKind::kKernels;
    case HousekeepingPolicy::kBesideSpans:
      return false;
  }
  return true;
}

GpuArbiter::SpanStart GpuArbiter::BeginSpan(const std::vector<int>& gpus, SpanKind kind) {
  std::unique_lock lock(mu_);
  const int64_t asked = NowNs();
  SpanStart start;
  start.timing = kind == SpanKind::kTiming;
  start.excludes = {Excludes(kind, HousekeepingKind::kContext),
                    Excludes(kind, HousekeepingKind::kKernels)};
  auto each_excluded = [&](auto&& apply) {
    for (int index : gpus) {
      for (size_t k = 0; k < kKinds; ++k) {
        if (start.excludes[k]) apply(gpus_.at(index), k);
      }
    }
  };
  each_excluded([](Gpu& gpu, size_t k) { ++gpu.spans_waiting[k]; });
  auto quiet = [&] {
    const int64_t now = NowNs();
    bool all = true;
    each_excluded([&](Gpu& gpu, size_t k) {
      all = all && gpu.housekeeping[k] == 0 && !HousekeepingOverdue(gpu, k, now);
    });
    return all;
  };
  // Timed: house-keeping turns overdue with no one to notify.
  while (!quiet())
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  each_excluded([](Gpu& gpu, size_t k) {
    --gpu.spans_waiting[k];
    ++gpu.spans[k];
  });
  const int64_t began = NowNs();
  for (int index : gpus) {
    Gpu& gpu = gpus_.at(index);
    start.housekeeping_mark += gpu.housekeeping_begun - RunningHousekeeping(gpu);  // they overlap
    if (start.timing) gpu.duty.SpanBegan(began);
  }
  start.waited = std::chrono::nanoseconds(began - asked);
  return start;
}

uint64_t GpuArbiter::EndSpan(const std::vector<int>& gpus, const SpanStart& start) {
  std::lock_guard lock(mu_);
  const int64_t now = NowNs();
  uint64_t begun = 0;
  for (int index : gpus) {
    Gpu& gpu = gpus_.at(index);
    for (size_t k = 0; k < kKinds; ++k) {
      if (start.excludes[k] && gpu.spans[k] > 0) --gpu.spans[k];
    }
    if (start.timing) gpu.duty.SpanEnded(now);
    begun += gpu.housekeeping_begun;
  }
  cv_.notify_all();
  return begun - start.housekeeping_mark;
}

void GpuArbiter::BeginHousekeeping(int index, HousekeepingKind kind) {
  const auto k = static_cast<size_t>(kind);
  std::unique_lock lock(mu_);
  Gpu& gpu = gpus_.at(index);
  const auto waiting = gpu.housekeeping_waits[k].insert(NowNs());
  while (gpu.spans[k] > 0 || (gpu.spans_waiting[k] > 0 && !HousekeepingOverdue(gpu, k, NowNs())))
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  gpu.housekeeping_waits[k].erase(waiting);
  ++gpu.housekeeping[k];
  ++gpu.housekeeping_begun;
}

void GpuArbiter::EndHousekeeping(int index, HousekeepingKind kind) {
  const auto k = static_cast<size_t>(kind);
  std::lock_guard lock(mu_);
  Gpu& gpu = gpus_.at(index);
  if (gpu.housekeeping[k] > 0) --gpu.housekeeping[k];
  cv_.notify_all();
}

std::vector<GpuArbiter::Activity> GpuArbiter::Activities() const {
  std::lock_guard lock(mu_);
  const int64_t now = NowNs();
  std::vector<Activity> out;
  for (const auto& [index, gpu] : gpus_) {
    out.push_back(
        {index, gpu.duty.Read(now), RunningHousekeeping(gpu),
         static_cast<int>(gpu.waiters.size()) + (gpu.held ? 1 : 0),
         gpu.held ? gpu.holder : std::string(),
         gpu.held ? static_cast<double>(now - gpu.held_since_ns) / 1e9 : 0.0,
         static_cast<double>(gpu.held_closed_ns + (gpu.held ? now - gpu.held_since_ns : 0)) / 1e9});
  }
  return out;
}

int GpuArbiter::depth(int index) const {
  std::lock_guard lock(mu_);
  const Gpu& gpu = At(index);
  return static_cast<int>(gpu.waiters.size()) + (gpu.held ? 1 : 0);
}

}  // namespace kc::pool
