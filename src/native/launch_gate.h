// LaunchGate: holds the GPU back while a timed call queues its launches (issue 23, item 5).
//
// Why. A timed call starts on an idle GPU (cupti_timer.h drains before t0), so its first kernel
// starts the moment it is launched, and every later one only once the host has got through the
// Python between the launches. A call that splits its work over two streams then measures the
// host's stream switching, not the kernels: on the H200, torch.mul over 16 Mi float32 in two
// halves on two streams spans 52 to 55 us (18 us of it the GPU idle, waiting for the second
// launch) where one stream takes 33.7; gated, 33.9; ncu's two kernels sum to 33.1. Ten tiny
// kernels launched from a Python loop: 96 to 124 us, gated 20 (bench/multistream_span.py).
// Host launch gaps are not the kernel's time: ncu times each kernel alone, and a CUDA graph
// replays the whole call from one launch. The gate gives the call's span that meaning: from its
// first to its last GPU activity once all its launches are queued.
//
// How. Close() launches a one-thread kernel on the legacy default stream (torch's current
// stream unless the program changed it) that spins until a word in pinned, mapped host memory
// is set, and returns only once the kernel reports that it runs. Everything the call queues on
// that stream, or on a stream that waits on it (torch's Stream.wait_stream(current), a blocking
// stream), waits behind the gate. Open() sets the word after the call returned: a plain store
// to host memory, no CUDA call. Work on streams that wait on nothing runs beside the gate,
// ungated, as it did before.
//
// Attribution (activity_attribution.h) never gives the gate to the call: its launch's API
// record is made in Close(), before t0, and its device start precedes the host's seeing it run,
// so it too is before t0 (Close() waits a further kStartedLeadNs to leave clock conversion some
// room). Its end falls after t1, but a span counts only activities started in the window.
//
// The cost of a synchronizing call. A call that waits for the GPU (`.item()`, a device-to-host
// copy, torch.cuda.synchronize(), a stream's synchronize) waits for the gate, which nobody
// opens while the call waits: the kernel exits by itself after kLaunchGateTimeoutNs (%globaltimer)
// and reports so, which is also what a call whose host side outlasts the timeout gets. Such a
// call costs one timeout (its work then ran as without a gate); the timer then stops gating
// for the rest of the benchmark and says so. Nothing can deadlock on the gate: the kernel ends
// within the timeout whatever the host does.
//
// The words live in one pinned allocation per process, never freed (a gate kernel may still
// read them, and cudaFreeHost would synchronize); Close() resets them before every launch.
//
// Usage (the device idle, e.g. after cudaDeviceSynchronize):
//   KC_RETURN_IF_ERROR(gate.Close());       // kDeadlineExceeded: it never started; not closed
//   t0; call(); t1;
//   gate.Open();
//   KC_RETURN_IF_ERROR(Synchronize());
//   KC_ASSIGN_OR_RETURN(GateOutcome outcome, gate.Outcome());
//
// Not thread-safe: one benchmark at a time per process, from one thread (cupti_timer.h).
#pragma once

#include <cstdint>

#include "base/status.h"

namespace kc::native {

// How long a closed gate holds the GPU back at most.
inline constexpr uint64_t kLaunchGateTimeoutNs = 20'000'000;
// How long Close() waits for the gate kernel to start before giving up (the GPU was busy with
// another process's work).
inline constexpr uint64_t kLaunchGateStartTimeoutNs = 1'000'000'000;
// How long Close() waits after the kernel reported that it runs, so that CUPTI's device start
// of the gate lies before t0 even if its conversion to host time is off by a little.
inline constexpr uint64_t kStartedLeadNs = 10'000;

enum class GateOutcome {
  kOpened,    // released by Open()
  kTimedOut,  // exited by itself after kLaunchGateTimeoutNs
};

class LaunchGate {
 public:
  LaunchGate() = default;
  LaunchGate(const LaunchGate&) = delete;
  LaunchGate& operator=(const LaunchGate&) = delete;
  ~LaunchGate();  // opens a gate left closed (an error path); the kernel then exits at once

  // Launches the gate kernel on the legacy default stream and returns once it runs. Allocates
  // the process's words on first use. kDeadlineExceeded when the kernel did not start within
  // kLaunchGateStartTimeoutNs: it was released and the device drained, so the gate is open and
  // nothing of it is left to run. Other errors are the CUDA calls'.
  Status Close();

  // Releases the gate. No CUDA call, so no API record lands in the timed window. No-op when open.
  void Open();

  // How the last gate ended; call only after Open() and a synchronize of the legacy stream.
  // kFailedPrecondition when no gate was closed, or the kernel has not finished.
  StatusOr<GateOutcome> Outcome() const;

  bool closed() const { return closed_; }

 private:
  bool closed_ = false;
  bool launched_ = false;  // a gate was closed since construction: Outcome() has one to read
};

}  // namespace kc::native
