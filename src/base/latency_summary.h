// Latency statistics of one benchmark's samples, shared by every timer (the host timer of
// kcoral._core and the CUPTI timer of kcoral._native), so the numbers a result reports are
// computed in C++, out of reach of user code (spec/benchmark.md §9.5, §9.8).
//
// Keys, in order: latency_ms_median, _mean, _min, _max, _std (population), n_samples, then
// latency_ms_p5 ... _p99 (linear interpolation between closest ranks, as numpy's default).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kc {

using LatencyFields = std::vector<std::pair<std::string, double>>;

// `samples_ms` must not be empty.
LatencyFields SummarizeLatencies(std::vector<double> samples_ms);

// The value at percentile `p` (0..100) of an ascending, non-empty list.
double Percentile(const std::vector<double>& ascending, double p);

}  // namespace kc
