#include "base/latency_summary.h"

#include <algorithm>
#include <cmath>

namespace kc {

double Percentile(const std::vector<double>& ascending, double p) {
  double position = static_cast<double>(ascending.size() - 1) * p / 100.0;
  size_t low = static_cast<size_t>(position);
  size_t high = std::min(low + 1, ascending.size() - 1);
  return ascending[low] +
         (ascending[high] - ascending[low]) * (position - static_cast<double>(low));
}

LatencyFields SummarizeLatencies(std::vector<double> samples_ms) {
  std::sort(samples_ms.begin(), samples_ms.end());
  const double n = static_cast<double>(samples_ms.size());
  double sum = 0;
  for (double s : samples_ms)
    sum += s;
  const double mean = sum / n;
  double squares = 0;
  for (double s : samples_ms)
    squares += (s - mean) * (s - mean);
  LatencyFields fields = {
      {"latency_ms_median", Percentile(samples_ms, 50)},
      {"latency_ms_mean", mean},
      {"latency_ms_min", samples_ms.front()},
      {"latency_ms_max", samples_ms.back()},
      {"latency_ms_std", samples_ms.size() > 1 ? std::sqrt(squares / n) : 0.0},
      {"n_samples", n},
  };
  for (int p : {5, 10, 25, 50, 75, 90, 95, 99}) {
    fields.emplace_back("latency_ms_p" + std::to_string(p), Percentile(samples_ms, p));
  }
  return fields;
}

}  // namespace kc
