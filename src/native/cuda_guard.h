// CudaGuard: the cpu_only watch (spec/protocol.md §2.6). Between Begin() and End() the first
// CUDA runtime or driver API call made by this process is recorded, with the Python location
// that made it; the instruction then fails with kind `gpu_access`.
//
// CUPTI allows one callback subscriber per process. The subscription is made on the first Begin()
// and kept for the worker's life; Begin/End only switch the RUNTIME_API and DRIVER_API domains
// on and off, so an idle guard costs nothing. The watch is best effort: it cannot see child
// processes, and a profiler holding the subscription makes Begin() fail with kUnavailable.
//
// Thread-safety: Begin/End are called by one thread (holding the GIL). The CUPTI callback may run
// on any thread; only the first entry is recorded (an atomic claim). Python frames are read only
// on a thread Python knows: directly if it holds the GIL, else after taking the GIL back
// (PyGILState_Ensure) for that one entry. A thread Python never saw reports "<native>".
//
// Usage:
//   KC_ASSIGN_OR_RETURN(CudaGuard* guard, CudaGuard::Get());
//   KC_RETURN_IF_ERROR(guard->Begin());
//   ... run the cpu_only call ...
//   KC_ASSIGN_OR_RETURN(std::optional<CudaAccess> access, guard->End());
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include <cupti.h>

#include "base/status.h"
#include "native/python_stack.h"

namespace kc::native {

struct CudaAccess {
  std::string cuda_call;    // API function name, e.g. "cudaMalloc" or "cuInit"
  std::string location;     // "<file>:<line> in <func>", or "<native>"
  std::string stack;        // traceback-like, innermost frame last; empty without Python
  int64_t detected_ns = 0;  // CLOCK_MONOTONIC
};

class CudaGuard {
 public:
  // The process's guard; subscribes to CUPTI callbacks on the first call.
  static StatusOr<CudaGuard*> Get();

  CudaGuard(const CudaGuard&) = delete;
  CudaGuard& operator=(const CudaGuard&) = delete;

  Status Begin();
  // nullopt when no CUDA API was entered since Begin().
  StatusOr<std::optional<CudaAccess>> End();

 private:
  CudaGuard() = default;

  static void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain,
                                  CUpti_CallbackId callback_id, const void* callback_data);
  Status EnableDomains(bool enable);
  void Record(const char* function_name);
  void SetLocation(PythonStack stack);

  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::atomic<bool> armed_{false};     // between Begin() and End()
  std::atomic<bool> claimed_{false};   // a callback took the first entry
  std::atomic<bool> recorded_{false};  // ... and finished writing access_
  CudaAccess access_;                  // written by the claiming thread only, before recorded_
};

}  // namespace kc::native
