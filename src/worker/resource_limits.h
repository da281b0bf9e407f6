// Limits a worker puts on itself before it serves a program, so that user
// code that exhausts memory fails on its own instead of taking the host (and
// with it the server) down (DESIGN.md "Behaviour we hold ourselves to").
#pragma once

#include <cstdint>

#include "base/status.h"

namespace kc::worker {

// Makes this process the OOM killer's first choice (oom_score_adj 1000, best
// effort) and, when `address_space_mbytes` > 0, caps its address space
// (RLIMIT_AS); both are inherited by everything it starts.
Status LimitResources(uint64_t address_space_mbytes);

}  // namespace kc::worker
