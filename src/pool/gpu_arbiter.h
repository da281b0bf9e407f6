// GpuArbiter: the exclusive leases of a server's GPUs (spec/server.md §2.6),
// granted in strict FIFO order on each GPU and all-or-nothing for a set of
// GPUs (a reserved multi-GPU job, §2.12).
//
// A set takes its tickets on all of its GPUs at once, under one lock, so
// tickets are ordered the same way on every GPU. The oldest waiter is then at
// the front of each of its queues and is granted as soon as its GPUs are
// free: nobody deadlocks. A waiting set holds later acquirers of its GPUs
// back (so it never starves) but claims nothing until every GPU of it is free.
// A history ring per GPU answers "who held this GPU at time t".
//
// It also keeps timing spans and house-keeping apart (docs/gpu-scheduling.md).
// A timing span (a benchmark's timed calls; a reserved job's whole life) must
// run undisturbed, and creating or destroying a CUDA context
// (house-keeping: stand-by workers initializing, retired ones tearing down)
// disturbs it, while it does no harm to a GPU that nobody times. So on each
// GPU they exclude each other, and house-keeping jobs run together, outside
// the lease: a span waits for running house-keeping to end, and new
// house-keeping waits while a span runs or waits, unless it has waited
// kHousekeepingPatience; then spans wait for it, and every house-keeping job
// waiting at that moment joins it, so a GPU busy timing still gets its
// stand-by workers, in batches.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace kc::pool {

class GpuArbiter {
 public:
  explicit GpuArbiter(const std::vector<int>& gpu_indices);

  // Blocks until `holder` holds every GPU of `gpus` (distinct, known). Returns
  // false, holding nothing and queued nowhere, if `give_up` (checked every
  // 50 ms) turned true first.
  bool Acquire(const std::vector<int>& gpus, const std::string& holder,
               const std::function<bool()>& give_up = {});
  // Ends the holder's tenure on each of `gpus` that is held; a no-op on the others.
  void Release(const std::vector<int>& gpus);

  // `count` GPUs for a new set: those with the fewest holders and waiters,
  // then the lowest indices. Sorted.
  StatusOr<std::vector<int>> Choose(int count) const;

  // The holder of `gpu` at steady-clock time `when_ns`, or nullopt if it was free.
  std::optional<std::string> HolderAt(int gpu, int64_t when_ns) const;
  // Everyone who held `gpu` at some time in [from_ns, to_ns], in order.
  std::vector<std::string> HoldersBetween(int gpu, int64_t from_ns, int64_t to_ns) const;
  // Holder plus waiters of `gpu`.
  int depth(int gpu) const;

  // A timing span on every GPU of `gpus`; returns how long it waited for house-keeping.
  std::chrono::nanoseconds BeginSpan(const std::vector<int>& gpus);
  void EndSpan(const std::vector<int>& gpus);
  // House-keeping on `gpu` (a context created or destroyed).
  void BeginHousekeeping(int gpu);
  void EndHousekeeping(int gpu);

  static constexpr std::chrono::milliseconds kHousekeepingPatience{250};

 private:
  struct Tenure {
    int64_t start_ns, end_ns;
    std::string holder;
  };
  struct Gpu {
    std::deque<uint64_t> waiters;  // tickets, oldest first
    bool held = false;
    std::string holder;
    int64_t held_since_ns = 0;
    std::deque<Tenure> history;
    int spans = 0, spans_waiting = 0, housekeeping = 0;
    std::multiset<int64_t> housekeeping_waits;  // since when each waiting job waits
  };
  static constexpr size_t kHistory = 256;

  bool Grantable(const std::vector<int>& gpus, uint64_t ticket) const;  // mu_ held
  bool HousekeepingOverdue(const Gpu& gpu, int64_t now_ns) const;       // mu_ held
  const Gpu& At(int gpu) const;                                         // mu_ held

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;  // guarded by mu_
  std::map<int, Gpu> gpus_;   // keys fixed at construction; values guarded by mu_
};

int64_t SteadyNowNs();

}  // namespace kc::pool
