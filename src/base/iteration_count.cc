#include "base/iteration_count.h"

#include <algorithm>
#include <cmath>

namespace kc {

int64_t BudgetIterationCount(double budget_ms, double estimate_ms, int64_t minimum, int64_t cap) {
  if (!(estimate_ms > 0)) return cap;
  const double fits = std::floor(budget_ms / estimate_ms);  // int() of a non-negative value
  if (!(fits < static_cast<double>(cap))) return cap;
  return std::max(minimum, static_cast<int64_t>(fits));
}

}  // namespace kc
