#include "base/utc_time.h"

#include <algorithm>
#include <chrono>
#include <ctime>

namespace kc {

std::string FormatUtcNow(const char* format, int fraction_digits) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm tm;
  gmtime_r(&seconds, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, format, &tm);
  std::string text = buffer;
  if (fraction_digits > 0) {
    long long scale = fraction_digits == 3 ? 1000 : 1000000;
    long long fraction =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1000000 / (1000000 / scale);
    const std::string digits = std::to_string(fraction);  // zero-padded to fraction_digits
    text += '.';
    text.append(
        std::max<size_t>(static_cast<size_t>(fraction_digits), digits.size()) - digits.size(), '0');
    text += digits;
  }
  return text + "Z";
}

int64_t UnixMillisecondsNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t UnixMicrosecondsNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace kc
