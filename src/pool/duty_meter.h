// DutyMeter: a GPU's duty, defined once for the whole server (issue 25): the fraction of wall
// time the GPU spends inside timing spans (a benchmark's warm-up, checks and timed calls;
// docs/gpu-scheduling.md). Time inside overlapping spans counts once. What a GPU does
// between spans (a request's set-up, its checks, stand-by workers' contexts) is not duty:
// duty is the share of the GPU that produced timed numbers.
//
// Two readings: since the meter started (the server's start), and over the last kWindow (or
// since the start, if that is shorter), so operators see it live in /metrics and /health.
//
// Pure and not thread-safe: the caller passes the time and holds its own lock (GpuArbiter).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>

namespace kc::pool {

class DutyMeter {
 public:
  static constexpr std::chrono::seconds kWindow{60};

  explicit DutyMeter(int64_t started_ns) : started_ns_(started_ns) {}

  // Spans may overlap (the lease keeps timing spans apart, but the meter does not rely on
  // it); the GPU is inside from the first begin to the last end.
  void SpanBegan(int64_t now_ns);
  void SpanEnded(int64_t now_ns);

  struct Reading {
    double inside_seconds = 0;  // since the start
    double since_start = 0;     // inside_seconds / the time since the start, in [0, 1]
    double last_window = 0;     // the fraction of the last kWindow (or less, early on)
    double window_seconds = 0;  // that window's length
    bool inside = false;        // a timing span is open now (the dashboard's "span in progress")
  };
  Reading Read(int64_t now_ns) const;

 private:
  struct Interval {
    int64_t begin_ns, end_ns;
  };
  void Forget(int64_t now_ns);  // closed intervals that ended before the window

  const int64_t started_ns_;
  int depth_ = 0;
  int64_t open_since_ns_ = 0;     // valid while depth_ > 0
  int64_t closed_inside_ns_ = 0;  // every closed interval, since the start
  std::deque<Interval> recent_;   // closed intervals that may reach into the window
};

}  // namespace kc::pool
