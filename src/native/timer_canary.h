// The timer's canary: a one-thread kernel of our own launched after every timed call, once the
// call has drained (outside its span). Its CUPTI record must arrive: a timed loop whose canaries
// left fewer records than were launched had its activity recording switched off or torn down
// from inside (cuptiActivityDisable, cuptiFinalize, a rewritten libcupti), and its samples
// cannot be believed (docs/benchmark-integrity.md "The timer checks itself").
#pragma once

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace kc::native {

Status EnqueueTimerCanary(cudaStream_t stream);

// Whether a kernel activity record's name is the canary's.
bool IsTimerCanary(const char* kernel_name);

}  // namespace kc::native
