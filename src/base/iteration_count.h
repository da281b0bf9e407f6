// How many calls fit a time budget, shared by the host timer (worker/host_timer.h) and the
// CUPTI timer (native/cupti_timer.h): spec/benchmark.md §1.3 step 2.
#pragma once

#include <cstdint>

namespace kc {

// max(minimum, int(budget_ms / estimate_ms)), at most `cap`; `cap` itself when estimate_ms is
// not positive (or not a number): a call too fast to measure gets the most iterations.
int64_t BudgetIterationCount(double budget_ms, double estimate_ms, int64_t minimum, int64_t cap);

}  // namespace kc
