#include "server/tenancy/tenant_limits.h"

#include <charconv>
#include <cmath>

namespace kc::server {

namespace {

// "1024", "64M", "1G": a count, with a binary K/M/G suffix allowed.
std::optional<int64_t> ParseCount(std::string_view text) {
  int shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
    if (shift != 0) text.remove_suffix(1);
  }
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  if (value > (INT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

std::optional<double> ParseSeconds(const std::string& text) {
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(value) || value < 0) return std::nullopt;
    return value;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

StatusOr<TenantLimits> ParseTenantLimits(const std::vector<std::string>& fields) {
  TenantLimits limits;
  for (const std::string& field : fields) {
    const size_t equals = field.find('=');
    const std::string name = field.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : field.substr(equals + 1);
    auto bad = [&](const std::string& what) {
      return InvalidArgumentError("limit '" + name + "': " + what);
    };
    if (name == "in_flight" || name == "queued" || name == "max_request_bytes" ||
        name == "gpu_count") {
      auto count = ParseCount(value);
      if (!count) return bad("expected a whole number (K, M, G allowed), not '" + value + "'");
      (name == "in_flight"           ? limits.in_flight
       : name == "queued"            ? limits.queued
       : name == "max_request_bytes" ? limits.max_request_bytes
                                     : limits.gpu_count) = *count;
    } else if (name == "gpu_seconds" || name == "cpu_seconds" || name == "weight") {
      auto seconds = ParseSeconds(value);
      if (!seconds) return bad("expected a number >= 0, not '" + value + "'");
      if (name == "weight") {
        if (*seconds <= 0) return bad("the weight must be above 0");
        limits.weight = *seconds;
      } else {
        (name == "gpu_seconds" ? limits.gpu_seconds : limits.cpu_seconds) = *seconds;
      }
    } else {
      return InvalidArgumentError(
          "unknown limit '" + name +
          "' (known: in_flight, queued, gpu_seconds, cpu_seconds, max_request_bytes, "
          "gpu_count, weight)");
    }
  }
  return limits;
}

}  // namespace kc::server
