// One run of a program on a worker (worker_process.h WorkerProcess::Run): what the pool
// asks of it, and what the worker and the server saw of it. Shared by the pool, the seats and
// the server, which read a run's outcome, times and lease without the process behind it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/shared_bytes.h"
#include "pool/cancel_flag.h"
#include "pool/fair_share.h"
#include "pool/gpu_census.h"
#include "pool/gpu_lease.h"

namespace kc::pool {

struct BlobFd {
  std::string sha256;
  int fd;  // borrowed; must stay open for the duration of Run
};

// How a run holds GPUs (run_session.h): not at all (a CPU worker), through its seat's shared
// lease on the worker's lease frames, or reserved by the caller for the worker's whole life.
enum class LeaseMode { kNone, kShared, kReserved };

struct RunRequest {
  std::string request_id;
  std::string program_json;
  std::vector<BlobFd> blobs;
  std::string workspace;
  int64_t output_limit_bytes = 0;
  uint64_t max_response_bytes = 0;
  // Excludes time spent waiting for the GPU lease (spec/protocol.md §2.2).
  std::chrono::nanoseconds timeout{0};
  LeaseMode lease_mode = LeaseMode::kNone;
  GpuLease* lease = nullptr;  // kShared: the seat's lease
  // kShared: who holds the lease's GPU at each span's ends; null where NVML cannot say (the
  // reason is in census_unavailable).
  const GpuCensus* census = nullptr;
  std::string census_unavailable;
  std::shared_ptr<const CancelFlag> cancel;  // raised: kill the worker, end kCancelled
  TenantShare share;                         // its place in the lease's fair share
  // By instruction index: whether the engine gives the GPU lease back there (file uploads, file
  // and folder returns, cpu_only runs: spec/protocol.md §2.6). A lease_release anywhere else is
  // user code forging one to use the GPU off the lease: refused, the lease stays held.
  std::vector<bool> releases_at;
  // kShared: GPU seconds the worker's processes may keep the SMs busy while the run does not
  // hold the lease (off_lease_meter.h) before the worker is killed; 0: not watched. Needs
  // census->samples_use().
  double off_lease_bound_seconds = 0;
};

struct CapturedStream {
  std::string head;  // the first output_limit_bytes bytes
  bool truncated = false;
};

struct RunResult {
  enum class Ending {
    kOutcome,    // the worker answered
    kCrashed,    // the worker died or closed its socket
    kTimedOut,   // the execution budget ran out (worker killed)
    kBroken,     // the worker sent something it must not (worker killed)
    kCancelled,  // the client went away (worker killed)
    kOffLease,   // its processes used the GPU off the lease past the bound (worker killed)
  };
  Ending ending = Ending::kBroken;
  // False when the worker was gone before it took the request: the pool
  // hands the request to another worker.
  bool delivered = true;
  std::string outcome_json;
  // Its memfd's size; outcome_json holds at most max_response_bytes + 1 of it.
  uint64_t outcome_bytes = 0;
  SharedBytes parts;           // binary segments, concatenated: the worker's sealed memfd, mapped
  int instruction_index = -1;  // running when it ended; -1 outside any
  std::string message;         // for kCrashed/kBroken
  CapturedStream out, err;
  double lease_wait_ms = 0;  // measured here, in the server
  double lease_held_ms = 0;
  // Its benchmarks' timing spans (gpu_arbiter.h): how many, how long they ran, how long
  // they waited for house-keeping, and the house-keeping jobs that ran beside them.
  int spans = 0;
  double span_held_ms = 0;
  double span_wait_ms = 0;
  uint64_t housekeeping_beside_spans = 0;
  // Processes outside this server that held the GPU at a span's start or end (gpu_census.h),
  // each once; and why the census could not tell processes apart, if it could not.
  std::vector<GpuHolder> foreign_gpu_holders;
  std::string census_unavailable;
  // Each instruction's wall time as the server saw it (its instruction to its
  // instruction_end frame), the part of it spent waiting for the GPU lease, and
  // whether the run held the lease when it ended: where a run's time and its
  // lease go (the run_timeline event). The first kTimedInstructions only.
  struct InstructionTime {
    int index;
    double ms;
    double lease_wait_ms;
    bool leased;
  };
  static constexpr size_t kTimedInstructions = 512;
  std::vector<InstructionTime> instruction_times;
  std::vector<std::string> lease_waited_for;  // who held the lease while this run waited
  std::string retire_reason;  // the worker asks to be retired: poisoned_context, library_limit,
                              // worker_asked (any other text it sent)
  int64_t gpu_access_detected_ns = 0;  // steady clock; 0: no gpu_access violation
  int refused_releases = 0;            // lease_release frames where the program gives no lease back
  double off_lease_gpu_ms = 0;         // SM-busy time of its processes off the lease (estimated)
  int off_lease_pid = 0;               // the last process seen using it (the server's PID)
  nlohmann::json off_lease_evidence;   // its samples and the run's tenures (run_session.cc)
  // The worker's key for sealed benchmark records (ipc/frame.h ready), to check what it returned.
  std::string seal_key;
};

}  // namespace kc::pool
