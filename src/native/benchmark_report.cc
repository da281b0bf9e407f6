#include "native/benchmark_report.h"

#include <algorithm>
#include <cmath>

#include "base/latency_summary.h"

namespace kc::native {

nlohmann::json LatencyJson(const SampleSet& samples) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : SummarizeLatencies(samples.samples_ms)) {
    if (key == "n_samples") {
      out[key] = static_cast<int64_t>(value);
    } else {
      out[key] = value;
    }
  }
  out["activities_stable"] = samples.activities_stable;
  return out;
}

RatioInterval PairedRatio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ratios(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    ratios[i] = a[i] / b[i];
  std::sort(ratios.begin(), ratios.end());
  const double n = static_cast<double>(ratios.size());
  RatioInterval interval;
  interval.median = Percentile(ratios, 50);
  // Ranks n/2 -+ 1.96 sqrt(n)/2 (normal approximation of Binomial(n, 1/2)), clamped.
  const double half_width = 0.98 * std::sqrt(n);
  const auto rank = [&](double r) { return static_cast<size_t>(std::clamp(r, 0.0, n - 1)); };
  interval.low = ratios[rank(std::floor(n / 2 - half_width))];
  interval.high = ratios[rank(std::ceil(n / 2 + half_width) - 1)];
  return interval;
}

}  // namespace kc::native
