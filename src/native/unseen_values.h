// UnseenValues: whether a benchmarked call is faster on input values it was given before than on
// values it never saw (docs/benchmark-integrity.md, S1). Pure: no CUDA; the calls are timed by
// benchmark_entry.cc.
//
// The timed calls' values are all shown to the function first: the reference and probe calls
// run on them, and a self-referenced benchmark can check a call only on values whose answer a
// call computed. So a cache keyed on the values themselves (a fingerprint of their contents)
// computes on first sight and replays after, and every check agrees with it. After the timed
// loop, pairs of drained, cold-L2 calls alternate between the fresh variant the probes showed
// (seen) and the caller's values reversed and scaled anew (never seen). Honest work takes the
// same time on both (the values are alike: reversed, scaled within [3/4, 1]); a cache that
// computes on a miss is slower on the new values, and is flagged (never refused). A cache that
// answers new values, fast, with an answer it holds (the caller's values') is flagged too: its
// outputs on new values equal that answer bit for bit. One that answers them with garbage of
// its own making is out of this check's reach: only a reference out of the candidate's reach on
// unseen inputs (`grade`) can check those calls.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "native/span_findings.h"

namespace kc::native {

struct UnseenValuesTiming {
  std::vector<double> seen_ms;    // host time of each drained call, values seen before
  std::vector<double> unseen_ms;  // values never given before
  bool raised = false;            // a call raised: the pairs ended there
  // Calls on new values whose outputs were, bit for bit, the answer to the caller's values
  // (CheckedCalls::AnsweredNewValuesAsCaller).
  int answered_as_caller = 0;
};

// The median of `samples_ms`, as the report's latency_ms_median computes it; 0 when empty.
double MedianMs(std::vector<double> samples_ms);

// Pairs to time: as many as a quarter of the repeat budget allows at the timed median, 3 to 16.
int UnseenPairs(double median_ms, double repeat_ms);

// The scale of the k-th never-seen values (k from 0): 3/4 + (k + 1)/64, distinct from the fresh
// variant's 3/4 even after bfloat16 rounding, and at most 1.
float UnseenScale(int k);

// Adds a flag to `found` when the seen calls were faster beyond noise, or a call raised;
// returns integrity.defences.unseen_values.
nlohmann::json JudgeUnseenValues(const UnseenValuesTiming& timing, SpanFindings& found);

}  // namespace kc::native
