// RunSession: one program on one worker, from the run message to the outcome (or the worker's
// end): the server's half of the conversation (ipc/messages.h, docs/worker-conversation.md).
//
// One handler per message (lease_acquire, lease_release, span_begin, span_end, instruction,
// instruction_end, outcome) and per event (the deadline, the client's cancel, the worker's
// death, output on its stdout and stderr). The lease follows RunRequest::lease_mode:
//   - kNone: a CPU worker; a lease frame is a broken worker;
//   - kShared: the seat's GpuLease, taken on lease_acquire and given back on lease_release or
//     at the end, whatever ended the run; lease waits never consume the execution budget;
//     a span_begin under the lease is a timing span (gpu_arbiter.h). A lease_release is
//     honoured only inside an instruction where the engine gives the lease back
//     (RunRequest::releases_at); elsewhere it is user code's forgery and the lease stays held
//     (the engine's own release after the last instruction is one: the run's end gives the
//     lease back a moment later). Instructions must start in order, one at a time, and end
//     where they started, so user code cannot pose as a later instruction either. While the
//     run does not hold the lease, NVML's samples of its processes are read every 250 ms
//     (off_lease_meter.h); past RunRequest::off_lease_bound_seconds of GPU use off the lease,
//     the worker is killed (kOffLease);

//   - kReserved: the caller holds every GPU the worker sees for the worker's whole life
//     (reserved_gpu_job.h): lease frames are granted at once, spans are not gated.
//
// Usage (WorkerProcess::Run):
//   RunSession session({child, socket_fd, &cgroup, seal_key}, request);
//   RunResult result = session.Run();
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/unique_fd.h"
#include "ipc/frame.h"
#include "ipc/messages.h"
#include "pool/child_process.h"
#include "pool/gpu_arbiter.h"
#include "pool/lease_account.h"
#include "pool/off_lease_meter.h"
#include "pool/worker_cgroup.h"
#include "pool/worker_process.h"

namespace kc::pool {

class RunSession {
 public:
  // What the session needs of its worker.
  struct Worker {
    ChildProcess& child;
    int socket_fd;
    const WorkerCgroup* cgroup;  // for an out-of-memory kill's message; may be null
    std::string seal_key;
  };

  RunSession(Worker worker, const RunRequest& request);
  RunResult Run();

 private:
  // A handler's verdict: keep going, or the run is over (result_ is final).
  enum class Step { kContinue, kDone };
  struct Pipes {
    UniqueFd out_read, err_read;
  };

  // Sends the run message; kDone (undelivered) when the worker is gone.
  Step Start(Pipes& pipes);
  Step Loop(Pipes& pipes);
  Step OnFrame(ipc::Frame& frame, Pipes& pipes);
  Step OnLeaseAcquire();
  Step OnLeaseRelease();
  Step OnSpanBegin();
  void OnSpanEnd();
  void TakeCensus();
  // Reads NVML's samples when due, while the lease is not held; true once the run's processes
  // used the GPU off the lease past the bound.
  bool OffLeaseOverBound();
  void RecordOffLeaseEvidence();
  Step KilledForOffLeaseUse();
  Step OnInstruction(const ipc::Frame& frame);
  Step OnInstructionEnd(const ipc::Frame& frame);
  Step OnOutcome(ipc::Frame& frame, Pipes& pipes);
  Step OnOutput(int fd, CapturedStream& stream);
  Step Crashed();
  Step Killed(RunResult::Ending ending, std::string message);
  Step Fail(RunResult::Ending ending, std::string message);
  Step Grant(ipc::MessageType granted);
  // Ends the span and gives the lease back; the result gets their times.
  void Settle();

  Worker worker_;
  const RunRequest& request_;
  RunResult result_;
  size_t output_limit_;
  Clock::time_point deadline_;
  std::optional<LeaseAccount> lease_;       // kShared only
  std::optional<OffLeaseMeter> off_lease_;  // kShared, where NVML samples processes
  Clock::time_point next_use_read_{};
  std::optional<GpuArbiter::SpanStart> span_;
  Clock::time_point span_since_, instruction_since_;
  int running_instruction_ = -1;  // between instruction and instruction_end; else -1
  int last_started_ = -1;
  double wait_before_instruction_ = 0;  // lease wait when the instruction began
};

}  // namespace kc::pool
