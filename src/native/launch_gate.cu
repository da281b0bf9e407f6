#include <atomic>
#include <chrono>
#include <cstdint>

#include <cuda_runtime.h>

#include "native/cuda_status.h"
#include "native/launch_gate.h"

namespace kc::native {
namespace {

// Shared by the host and the gate kernel, in pinned, mapped host memory.
struct GateWords {
  uint32_t open;     // host -> kernel: nonzero releases it
  uint32_t started;  // kernel -> host: 1 once it runs
  uint32_t outcome;  // kernel -> host: 0 while it runs, then kOutcomeOpened or kOutcomeTimedOut
};
constexpr uint32_t kOutcomeOpened = 1;
constexpr uint32_t kOutcomeTimedOut = 2;

__device__ uint64_t GlobalTimerNs() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// One thread: says it runs, then spins on `open` (a read over the bus every few hundred ns)
// until the host sets it or `timeout_ns` pass.
__global__ void SpinUntilOpen(GateWords* words, uint64_t timeout_ns) {
  volatile GateWords* w = words;
  const uint64_t start = GlobalTimerNs();
  w->started = 1;
  __threadfence_system();
  uint32_t outcome = kOutcomeOpened;
  while (w->open == 0) {
    if (GlobalTimerNs() - start > timeout_ns) {
      outcome = kOutcomeTimedOut;
      break;
    }
    __nanosleep(256);
  }
  w->outcome = outcome;
  __threadfence_system();
}

struct ProcessWords {
  GateWords* host = nullptr;
  GateWords* device = nullptr;
};

// Allocated on first use and kept for the process: portable, so one allocation serves every
// device; mapped, so the kernel reads it over the bus.
StatusOr<ProcessWords> Words() {
  static ProcessWords words;
  if (words.host != nullptr) return words;
  void* host = nullptr;
  KC_CUDA_RETURN_IF_ERROR(
      cudaHostAlloc(&host, sizeof(GateWords), cudaHostAllocMapped | cudaHostAllocPortable));
  void* device = nullptr;
  const cudaError_t mapped = cudaHostGetDevicePointer(&device, host, 0);
  if (mapped != cudaSuccess) {
    static_cast<void>(cudaFreeHost(host));
    return CudaStatus(mapped, "cudaHostGetDevicePointer(&device, host, 0)", __FILE__, __LINE__);
  }
  words.host = static_cast<GateWords*>(host);
  words.device = static_cast<GateWords*>(device);
  *words.host = GateWords{.open = 1, .started = 0, .outcome = kOutcomeOpened};  // no gate yet
  return words;
}

uint32_t Load(const uint32_t& word) {
  return std::atomic_ref<const uint32_t>(word).load(std::memory_order_acquire);
}

void Store(uint32_t& word, uint32_t value) {
  std::atomic_ref<uint32_t>(word).store(value, std::memory_order_release);
}

uint64_t SteadyNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

LaunchGate::~LaunchGate() {
  Open();
}

Status LaunchGate::Close() {
  if (closed_) return FailedPreconditionError("the launch gate is already closed");
  KC_ASSIGN_OR_RETURN(ProcessWords words, Words());
  // Resetting the words under a running gate would hold it closed until its timeout.
  if (Load(words.host->outcome) == 0) {
    return FailedPreconditionError("the last launch gate still runs: synchronize before Close()");
  }
  Store(words.host->started, 0);
  Store(words.host->outcome, 0);
  Store(words.host->open, 0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t timeout_ns = kLaunchGateTimeoutNs;
  void* args[] = {&words.device, &timeout_ns};
  KC_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(reinterpret_cast<const void*>(&SpinUntilOpen), dim3(1),
                                           dim3(1), args, 0, cudaStreamLegacy));
  closed_ = true;
  launched_ = true;

  const uint64_t launched_ns = SteadyNs();
  while (Load(words.host->started) == 0) {
    if (SteadyNs() - launched_ns > kLaunchGateStartTimeoutNs) {
      // Released before it runs, it exits at once; drained, its start precedes the window.
      Open();
      KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      return DeadlineExceededError("the launch gate kernel did not start within 1 s");
    }
  }
  const uint64_t started_ns = SteadyNs();
  while (SteadyNs() - started_ns < kStartedLeadNs) {
  }
  return Status::Ok();
}

void LaunchGate::Open() {
  if (!closed_) return;
  // Words() succeeded in Close(): this only reads the cached pointers.
  StatusOr<ProcessWords> words = Words();
  if (words.ok()) Store(words->host->open, 1);
  closed_ = false;
}

StatusOr<GateOutcome> LaunchGate::Outcome() const {
  if (closed_ || !launched_) {
    return FailedPreconditionError("no launch gate was closed and opened");
  }
  KC_ASSIGN_OR_RETURN(ProcessWords words, Words());
  switch (Load(words.host->outcome)) {
    case kOutcomeOpened:
      return GateOutcome::kOpened;
    case kOutcomeTimedOut:
      return GateOutcome::kTimedOut;
    default:
      return FailedPreconditionError("the launch gate kernel has not finished");
  }
}

}  // namespace kc::native
