// The host timer behind kcoral.builtins.benchmark on CPU servers (spec/benchmark.md §1, host
// form): the loop, the clock and the statistics run in C++, so user code cannot patch them
// (spec/benchmark.md §9.8); the result is sealed like the CUPTI timer's (result_seal.h).
//
// Per call: one untimed call (first-use costs are not the kernel's), then five calls timed
// together as the estimate; counts not given explicitly are budget / estimate, at least the
// minimum (warm-up 0, repeat 1) and at most 1,000,000 (also when the estimate is 0); then the
// warm-up calls, then `repeat` calls each timed alone with clock_gettime(CLOCK_MONOTONIC).
//
// Runs with the GIL held (the callable is Python). A Python exception from the callable
// propagates unchanged as pybind11::error_already_set.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include "base/status.h"

namespace kc::worker {

inline constexpr int64_t kMaxHostIterations = 1'000'000;

struct HostBenchmarkOptions {
  std::optional<int64_t> warmup;  // explicit counts override their budget
  std::optional<int64_t> repeat;
  double warmup_ms = 25;
  double repeat_ms = 100;
};

// The count for one phase, by the rule above.
int64_t HostIterationCount(std::optional<int64_t> explicit_count, double budget_ms,
                           double estimate_ms, int64_t minimum);

// The unsealed result: the latency fields (base/latency_summary.h), activities_stable (true:
// no device activity), flush_l2 (false), warmup, repeat, timer "host". kInvalidArgument for
// counts or budgets out of range (builtins.py checks them first, with the user's message).
StatusOr<nlohmann::ordered_json> RunHostBenchmark(const pybind11::object& fn,
                                                  const pybind11::tuple& args,
                                                  const HostBenchmarkOptions& options);

}  // namespace kc::worker
