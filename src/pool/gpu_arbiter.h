// GpuArbiter: the exclusive leases of a server's GPUs (spec/server.md §2.6),
// granted by weighted fair share across tenants (fair_share.h; first come,
// first served within a tenant, and for everyone without keys) and
// all-or-nothing for a set of GPUs (a reserved multi-GPU job, §2.12).
//
// A set takes its tickets on all of its GPUs at once, under one lock. Waiters
// are ordered by (their tenant's virtual time, ticket), one order for every
// GPU, so the first waiter of that order is first on each of its GPUs and is
// granted as soon as they are free: nobody deadlocks. A waiting set holds later acquirers of its
// GPUs back (so it never starves) but claims nothing until every GPU of it is free. A history ring
// per GPU answers "who held this GPU at time t".
//
// It also keeps timing spans and house-keeping apart (docs/gpu-scheduling.md).
// A timing span (a benchmark's timed calls; a reserved job's whole life) must
// run undisturbed. House-keeping runs outside the lease, in two kinds:
//   - kContext: a stand-by creating its CUDA context, first allocation and
//     libraries' state, or a retired worker's context destroyed; no kernel;
//   - kKernels: a stand-by's first kernels (CUPTI, the L2 flush buffer, warm-ups).
// What each does to a timed kernel was measured over the honest corpus on an
// H200 (docs/gpu-scheduling.md, bench/housekeeping_perturbation.py): kernels of
// another process share the GPU's time slices and move medians (up to +12% on an
// L2-resident kernel); context work beside spans left medians within about 1%
// but moved tails (an L2-resident kernel's p99 +11%). So the default,
// kOutsideSpans, keeps both out; kContextsBesideSpans lets contexts through
// (82% duty against 51% on a saturating stream), kBesideSpans both (91%): an
// operator's choice. Excluded kinds and spans wait for each other: a span waits
// for running excluded house-keeping to end, and new house-keeping waits while
// a span that excludes it runs or waits, unless it has waited
// kHousekeepingPatience; then spans wait for it, and every job of that kind
// waiting at that moment joins it, so a GPU busy timing still gets its
// stand-by workers, in batches.
//
// Nothing is hidden: every span counts the house-keeping jobs of either kind
// that ran on its GPUs while it ran.
//
// Thread-safe.
#pragma once

#include <array>
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

#include "base/clock.h"
#include "base/status.h"
#include "pool/duty_meter.h"
#include "pool/fair_share.h"

namespace kc::pool {

enum class HousekeepingPolicy { kOutsideSpans, kContextsBesideSpans, kBesideSpans };
enum class HousekeepingKind { kContext, kKernels };

class GpuArbiter {
 public:
  GpuArbiter(const std::vector<int>& gpu_indices,
             HousekeepingPolicy policy = HousekeepingPolicy::kOutsideSpans);

  // Blocks until `holder` holds every GPU of `gpus` (distinct, known). Returns
  // false, holding nothing and queued nowhere, if `give_up` (checked every
  // 50 ms) turned true first.
  // Waiters are served by weighted fair share on lease time across tenants (fair_share.h);
  // one tenant's waiters in arrival order.
  bool Acquire(const std::vector<int>& gpus, const std::string& holder,
               const std::function<bool()>& give_up = {}, const TenantShare& share = {});
  // Ends the holder's tenure on each of `gpus` that is held; a no-op on the others.
  void Release(const std::vector<int>& gpus);

  // `count` GPUs for a new set: those with the fewest holders and waiters,
  // then the lowest indices. Sorted.
  StatusOr<std::vector<int>> Choose(int count) const;

  // The holder of `gpu` at `when_ns` (NowNs(), base/clock.h), or nullopt if it was free.
  std::optional<std::string> HolderAt(int gpu, int64_t when_ns) const;
  // Everyone who held `gpu` at some time in [from_ns, to_ns], in order.
  std::vector<std::string> HoldersBetween(int gpu, int64_t from_ns, int64_t to_ns) const;
  // Holder plus waiters of `gpu`.
  int depth(int gpu) const;

  // A span on every GPU of `gpus`: a benchmark's timing span, or a reserved
  // job's whole life, which keeps house-keeping out under either policy (its
  // GPUs are its own). EndSpan returns the house-keeping jobs on those GPUs that
  // overlapped it: always 0 for a span that keeps both kinds out.
  enum class SpanKind { kTiming, kReservation };
  static constexpr size_t kKinds = 2;  // HousekeepingKind's values
  struct SpanStart {
    std::chrono::nanoseconds waited{0};   // for house-keeping to end
    uint64_t housekeeping_mark = 0;       // jobs begun on its GPUs, less those still running
    std::array<bool, kKinds> excludes{};  // by HousekeepingKind
    bool timing = true;                   // counts toward the GPUs' duty (duty_meter.h)
  };
  SpanStart BeginSpan(const std::vector<int>& gpus, SpanKind kind = SpanKind::kTiming);
  uint64_t EndSpan(const std::vector<int>& gpus, const SpanStart& start);
  // House-keeping on `gpu`; waits while a span that excludes `kind` runs (see above).
  void BeginHousekeeping(int gpu, HousekeepingKind kind);
  void EndHousekeeping(int gpu, HousekeepingKind kind);

  static constexpr std::chrono::milliseconds kHousekeepingPatience{250};

  // What a GPU is doing, for /metrics and /health.
  struct Activity {
    int gpu = 0;
    DutyMeter::Reading duty;        // timing spans' share of wall time
    int housekeeping_running = 0;   // contexts being created or destroyed now
    int depth = 0;                  // holder plus waiters
    std::string holder;             // the lease's holder (a request id); empty: free
    double held_seconds = 0;        // how long the holder has held it
    double held_total_seconds = 0;  // every tenure since the start, the open one included
  };
  std::vector<Activity> Activities() const;

 private:
  struct Tenure {
    int64_t start_ns, end_ns;
    std::string holder;
  };
  struct Gpu {
    explicit Gpu(int64_t started_ns) : duty(started_ns) {}
    std::deque<uint64_t> waiters;  // tickets, oldest first
    bool held = false;
    std::string holder;
    TenantShare holder_share;  // charged its tenure on release
    int64_t held_since_ns = 0;
    int64_t held_closed_ns = 0;  // closed tenures, since the start
    std::deque<Tenure> history;
    // By HousekeepingKind: spans that keep it out, running and waiting; jobs running; since
    // when each waiting job waits.
    std::array<int, kKinds> spans{}, spans_waiting{};
    std::array<int, kKinds> housekeeping{};
    std::array<std::multiset<int64_t>, kKinds> housekeeping_waits;
    uint64_t housekeeping_begun = 0;  // jobs of either kind, ever
    DutyMeter duty;
  };
  static constexpr size_t kHistory = 256;

  bool Grantable(const std::vector<int>& gpus, uint64_t ticket) const;          // mu_ held
  bool Before(uint64_t ticket, uint64_t other) const;                           // mu_ held
  bool HousekeepingOverdue(const Gpu& gpu, size_t kind, int64_t now_ns) const;  // mu_ held
  bool Excludes(SpanKind span, HousekeepingKind job) const;
  static int RunningHousekeeping(const Gpu& gpu);  // of either kind; mu_ held
  const Gpu& At(int gpu) const;                    // mu_ held

  const HousekeepingPolicy policy_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;  // guarded by mu_
  std::map<int, Gpu> gpus_;   // keys fixed at construction; values guarded by mu_
  std::map<uint64_t, std::string> waiting_tenants_;  // by ticket; guarded by mu_
  FairShare share_;                                  // guarded by mu_
};

}  // namespace kc::pool
