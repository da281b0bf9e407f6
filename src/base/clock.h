// The one clock for measuring time in KCoral: `kc::Clock` (monotonic), and the
// helpers that turn its points and durations into the plain numbers that
// frames, JSON fields and poll() take. Every layer uses these (STYLE.md §1)
// instead of naming std::chrono::steady_clock or writing its own helpers.
//
//   const auto deadline = Clock::now() + timeout;
//   ::poll(fds, n, MillisecondsLeft(deadline));         // int ms, 0 once passed
//   reply["queue_ms"] = MillisecondsSince(enqueued);    // fractional ms
//   lease.HolderAt(NowNs());                            // int64 ns, CLOCK_MONOTONIC
//
// Nanosecond stamps are CLOCK_MONOTONIC (libstdc++'s steady_clock), so they
// compare with the ones a worker takes with clock_gettime(CLOCK_MONOTONIC)
// (gpu_access_detected_ns) on the same host. Wall-clock time, for log and
// /health timestamps only, is base/utc_time.h; never measure with it.
//
// All functions are thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

namespace kc {

using Clock = std::chrono::steady_clock;

// `t` as nanoseconds since the clock's epoch (boot, for CLOCK_MONOTONIC).
inline int64_t ToNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Now, as ToNs gives it.
inline int64_t NowNs() {
  return ToNs(Clock::now());
}

// `d` in milliseconds, with the fraction kept (for *_ms fields of results and logs).
template <typename Rep, typename Period>
double ToMilliseconds(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Milliseconds from `from` to `to` (negative if `to` is earlier), fraction kept.
inline double MillisecondsBetween(Clock::time_point from, Clock::time_point to) {
  return ToMilliseconds(to - from);
}

// Milliseconds from `start` until now, fraction kept.
inline double MillisecondsSince(Clock::time_point start) {
  return MillisecondsBetween(start, Clock::now());
}

// Whole milliseconds from now until `deadline`, as poll() and epoll_wait() take
// them: rounded down, 0 once the deadline has passed (never poll's -1, "forever"),
// and at most INT_MAX. A caller that must not return early loops until
// Clock::now() >= deadline.
inline int MillisecondsLeft(Clock::time_point deadline) {
  const int64_t left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, std::numeric_limits<int>::max()));
}

}  // namespace kc
