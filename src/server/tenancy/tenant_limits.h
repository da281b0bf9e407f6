// TenantLimits: what one tenant may use (issue 27, docs/deploy.md "Quotas and fair share"),
// from the `limits` lines of the --auth-keys file:
//
//   limits alice in_flight=8 queued=100 gpu_seconds=600 cpu_seconds=1800
//                max_request_bytes=1G gpu_count=1 weight=3
//   limits * weight=1 queued=50          # every tenant without a line of its own
//
// Every name is optional; a limit not given is no limit, the weight defaults to 1. The
// seconds are per quota window (--quota-window-seconds). Two keys of one tenant share them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kc::server {

struct TenantLimits {
  std::optional<int64_t> in_flight;          // requests admitted and not yet answered
  std::optional<int64_t> queued;             // of those, waiting for a seat
  std::optional<double> gpu_seconds;         // GPU lease time per window
  std::optional<double> cpu_seconds;         // seat time off the GPU lease per window
  std::optional<int64_t> max_request_bytes;  // the largest request body
  std::optional<int64_t> gpu_count;          // the most whole GPUs options.gpu_count may ask
  double weight = 1;                         // its share of seats and leases (fair_share.h)
};

// The `name=value` fields of one limits line; kInvalidArgument naming the field.
StatusOr<TenantLimits> ParseTenantLimits(const std::vector<std::string>& fields);

}  // namespace kc::server
