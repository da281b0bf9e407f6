#include "native/unseen_values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/latency_summary.h"

namespace kc::native {
namespace {

constexpr int kMinPairs = 3;
constexpr int kMaxPairs = 16;
// Flagged when the seen calls' median is below this share of the unseen calls' median and
// below it by more than kMinGapMs: host-timed drained calls vary by a few microseconds.
constexpr double kRatio = 0.8;
constexpr double kMinGapMs = 0.010;

std::string Us(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f us", ms * 1e3);
  return text;
}

}  // namespace

double MedianMs(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return Percentile(values, 50);
}

int UnseenPairs(double median_ms, double repeat_ms) {
  if (!(median_ms > 0)) return kMaxPairs;
  const double fit = 0.25 * repeat_ms / (2 * median_ms);
  return static_cast<int>(std::clamp(std::floor(fit), double{kMinPairs}, double{kMaxPairs}));
}

float UnseenScale(int k) {
  return 0.75f + static_cast<float>(std::min(k, kMaxPairs - 1) + 1) / 64;
}

nlohmann::json JudgeUnseenValues(const UnseenValuesTiming& timing, SpanFindings& found) {
  const double seen = MedianMs(timing.seen_ms);
  const double unseen = MedianMs(timing.unseen_ms);
  nlohmann::json report = {{"pairs", std::min(timing.seen_ms.size(), timing.unseen_ms.size())},
                           {"seen_median_ms", seen},
                           {"unseen_median_ms", unseen},
                           {"raised", timing.raised},
                           {"answered_as_caller", timing.answered_as_caller}};
  if (timing.answered_as_caller > 0) {
    found.flags.push_back(
        "on input values it had never seen, " + std::to_string(timing.answered_as_caller) + " of " +
        std::to_string(timing.unseen_ms.size()) +
        " calls returned its answer to the caller's values, bit for bit: it answers new values "
        "with an answer it holds, not by computing them (integrity.defences.unseen_values)");
  }
  if (timing.raised) {
    found.flags.push_back(
        "the benchmarked call raised when called again after its timed loop, on the fresh "
        "values the probes gave it or on new ones (the caller's reversed and scaled), though "
        "it ran on both kinds before: its speed on values it never saw is unknown "
        "(integrity.defences.unseen_values)");
  } else if (!timing.seen_ms.empty() && !timing.unseen_ms.empty() && seen < kRatio * unseen &&
             unseen - seen > kMinGapMs) {
    char ratio[16];
    std::snprintf(ratio, sizeof(ratio), "%.1f", unseen / seen);
    found.flags.push_back(
        "calls on input values the function had been given before took a median " + Us(seen) +
        ", calls on values it had never seen " + Us(unseen) + " (" + ratio +
        "x): its timed calls answer from a cache kept by the values' contents, so the median is "
        "not its computation's (integrity.defences.unseen_values)");
  }
  return report;
}

}  // namespace kc::native
