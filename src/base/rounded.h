// Rounded: a number for a JSON field, cut to the digits it is worth (a millisecond field to the
// microsecond, a fraction to four places), so that logs and pages carry no clock noise.
//
//   event["ms"] = Rounded(MillisecondsSince(started));   // 0.75 ms -> 0.75, not 0.7500312
//   gpu["duty"] = Rounded(duty, 1e-4);
#pragma once

#include <cmath>

namespace kc {

// `value` rounded to the nearest multiple of `unit`.
inline double Rounded(double value, double unit = 0.001) {
  return std::round(value / unit) * unit;
}

}  // namespace kc
