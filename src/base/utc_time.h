// UTC wall-clock timestamps for logs and /health ("2026-11-30T12:32:30.498Z").
#pragma once

#include <cstdint>
#include <string>

namespace kc {

// Now, formatted with strftime `format`, then `fraction_digits` (0, 3 or 6)
// of the second and a "Z".
std::string FormatUtcNow(const char* format, int fraction_digits);

// Milliseconds since the Unix epoch: deadlines and heartbeats shared between machines.
int64_t UnixMillisecondsNow();
// Microseconds since the Unix epoch: NVML's sample timestamps.
int64_t UnixMicrosecondsNow();

}  // namespace kc
