// The JSON a benchmark result is built from, before _core seals it (base/sealed_result_abi.h).
// Pure: no CUDA, no Python.
//
// One function: spec/benchmark.md §1.5 keys plus our statistics (base/latency_summary.h).
// Two functions (benchmark_paired): the candidate's keys at the top level, so the result reads
// like a benchmark result, plus "reference": {its keys} and the paired ratio
// candidate / reference per interleaved pair: ratio_median with a 95% confidence interval
// (distribution-free, from order statistics of the ratios), and speedup_median = 1 / ratio.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc::native {

struct SampleSet {
  std::vector<double> samples_ms;
  bool activities_stable = true;
};

nlohmann::json LatencyJson(const SampleSet& samples);

struct RatioInterval {
  double median = 0;
  double low = 0;
  double high = 0;
};

// Ratios a[i] / b[i]; the interval holds the median with >= 95% confidence (binomial ranks).
// a and b are non-empty, of equal length, positive.
RatioInterval PairedRatio(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace kc::native
