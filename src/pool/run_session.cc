#include "pool/run_session.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "base/memfd.h"
#include "base/utc_time.h"
#include "ipc/messages.h"

namespace kc::pool {
namespace {

// Reads what is available from a capture pipe, keeping the head. False at end of file.
bool Drain(int fd, CapturedStream& stream, size_t limit) {
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      size_t keep =
          stream.head.size() < limit ? std::min(limit - stream.head.size(), size_t(n)) : 0;
      stream.head.append(buffer, keep);
      if (keep < size_t(n) && limit > 0) stream.truncated = true;  // limit 0: capture off
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

struct Pipe {
  UniqueFd read, write;
};

StatusOr<Pipe> MakeCapturePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return InternalError(std::string("pipe2: ") + std::strerror(errno));
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// The reasons a worker gives (engine.py); any other text is named here, so that no worker text
// reaches event fields or metric labels.
std::string RetireReason(const std::string& asked) {
  return asked == "poisoned_context" || asked == "library_limit" ? asked : "worker_asked";
}

}  // namespace

RunSession::RunSession(Worker worker, const RunRequest& request)
    : worker_(std::move(worker)),
      request_(request),
      output_limit_(static_cast<size_t>(std::max<int64_t>(0, request.output_limit_bytes))) {
  result_.seal_key = worker_.seal_key;
  if (request.lease_mode == LeaseMode::kShared) {
    lease_.emplace(*request.lease, request.request_id, request.share);
    if (request.off_lease_bound_seconds > 0 && request.census != nullptr &&
        request.census->samples_use()) {
      off_lease_.emplace(UnixMicrosecondsNow());
    }
  }
}

RunResult RunSession::Run() {
  Pipes pipes;
  if (Start(pipes) == Step::kDone) return std::move(result_);
  Loop(pipes);
  return std::move(result_);
}

RunSession::Step RunSession::Start(Pipes& pipes) {
  auto program = MakeSealedMemfd("kcoral-program", request_.program_json);
  auto out = MakeCapturePipe();
  auto err = MakeCapturePipe();
  if (!program.ok() || !out.ok() || !err.ok()) {
    return Fail(RunResult::Ending::kBroken, "cannot prepare the request for the worker");
  }
  ipc::RunMessage run{request_.request_id,
                      request_.workspace,
                      request_.output_limit_bytes,
                      static_cast<int64_t>(request_.max_response_bytes),
                      {}};
  std::vector<int> fds = {program->get(), out->write.get(), err->write.get()};
  for (const BlobFd& blob : request_.blobs) {
    run.blobs.push_back(blob.sha256);
    fds.push_back(blob.fd);
  }
  if (Status sent = ipc::SendFrame(worker_.socket_fd, ipc::Encode(run), fds); !sent.ok()) {
    result_.delivered = false;
    return Fail(RunResult::Ending::kCrashed, "worker exited before the request: " + sent.message());
  }
  // Only the worker holds the write ends now, so end of file means it is gone.
  pipes.out_read = std::move(out->read);
  pipes.err_read = std::move(err->read);
  deadline_ = Clock::now() + request_.timeout;
  return Step::kContinue;
}

// A death is seen through the pidfd, at once: a child of the worker may hold the socket (and
// the pipes) open long after. Frames it sent before dying are read first.
RunSession::Step RunSession::Loop(Pipes& pipes) {
  pollfd polls[5] = {{worker_.socket_fd, POLLIN, 0},
                     {pipes.out_read.get(), POLLIN, 0},
                     {pipes.err_read.get(), POLLIN, 0},
                     {request_.cancel != nullptr ? request_.cancel->fd() : -1, POLLIN, 0},
                     {worker_.child.pidfd(), POLLIN, 0}};
  for (;;) {
    int wait_ms = MillisecondsLeft(deadline_);
    if (off_lease_ && !lease_->held())
      wait_ms = std::min(wait_ms, MillisecondsLeft(next_use_read_));
    const int rc = ::poll(polls, 5, wait_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (OffLeaseOverBound()) return KilledForOffLeaseUse();
    if (rc == 0) {
      if (Clock::now() < deadline_) continue;  // woken to read NVML's samples
      return Killed(RunResult::Ending::kTimedOut, "execution timed out");
    }
    for (int i = 1; i < 3; ++i) {
      if (polls[i].fd < 0 || !polls[i].revents) continue;
      if (!Drain(polls[i].fd, i == 1 ? result_.out : result_.err, output_limit_)) polls[i].fd = -1;
    }
    if (polls[3].revents)
      return Killed(RunResult::Ending::kCancelled, "the client closed the connection");
    if (!polls[0].revents) {
      if (polls[4].revents) return Crashed();
      continue;
    }
    StatusOr<ipc::Frame> frame = ipc::ReceiveFrame(worker_.socket_fd);
    if (!frame.ok()) return Crashed();
    if (OnFrame(*frame, pipes) == Step::kDone) return Step::kDone;
  }
}

RunSession::Step RunSession::OnFrame(ipc::Frame& frame, Pipes& pipes) {
  using ipc::MessageType;
  const std::optional<MessageType> type = ipc::TypeOf(frame);
  const bool leased = request_.lease_mode != LeaseMode::kNone;
  switch (type ? *type : MessageType::kFork) {  // an unknown word is unexpected, as fork is
    case MessageType::kSpanBegin:
      return OnSpanBegin();
    case MessageType::kSpanEnd:
      OnSpanEnd();
      return Step::kContinue;
    case MessageType::kLeaseAcquire:
      if (leased) return OnLeaseAcquire();
      break;
    case MessageType::kLeaseRelease:
      if (leased) return OnLeaseRelease();
      break;
    case MessageType::kInstruction:
      return OnInstruction(frame);
    case MessageType::kInstructionEnd:
      return OnInstructionEnd(frame);
    case MessageType::kOutcome:
      if (frame.fds.size() == 2) return OnOutcome(frame, pipes);
      break;
    default:
      break;
  }
  return Killed(RunResult::Ending::kBroken,
                "worker sent an unexpected " + ipc::QuotedWord(frame) + " frame");
}

RunSession::Step RunSession::Grant(ipc::MessageType granted) {
  if (!ipc::SendFrame(worker_.socket_fd, ipc::Signal(granted)).ok()) return Crashed();
  return Step::kContinue;
}

RunSession::Step RunSession::OnLeaseAcquire() {
  if (lease_ && !lease_->held()) {
    // Work left running off the lease is still watched while the run waits for it.
    const bool granted = lease_->Acquire([this] { return OffLeaseOverBound(); });
    deadline_ += lease_->last_wait();  // lease waits never consume the budget
    if (!granted) return KilledForOffLeaseUse();
    if (off_lease_) off_lease_->Acquired(UnixMicrosecondsNow());
  }
  return Grant(ipc::MessageType::kLeaseGranted);
}

// A reserved job's GPUs outlive the run: their holder gives them back.
RunSession::Step RunSession::OnLeaseRelease() {
  if (!lease_) return Step::kContinue;
  const auto& releases = request_.releases_at;
  const int at = running_instruction_;
  if (at < 0 || static_cast<size_t>(at) >= releases.size() || !releases[at]) {
    ++result_.refused_releases;  // kept: the GPU stays this run's, and counted against it
    return Step::kContinue;
  }
  OnSpanEnd();
  lease_->Release();
  if (off_lease_) off_lease_->Released(UnixMicrosecondsNow());
  return Step::kContinue;
}

bool RunSession::OffLeaseOverBound() {
  if (!off_lease_ || lease_->held() || Clock::now() < next_use_read_) return false;
  next_use_read_ = Clock::now() + std::chrono::milliseconds(250);
  auto samples = request_.census->UseAfter(off_lease_->read_after_us());
  if (!samples.ok()) return false;  // counts nothing; the next read may work
  const int worker = worker_.child.pid();
  off_lease_->Add(*samples, [worker](int pid) { return InProcessTree(pid, worker); });
  if (off_lease_->seconds() * 1000 > result_.off_lease_gpu_ms) RecordOffLeaseEvidence();
  return off_lease_->seconds() > request_.off_lease_bound_seconds;
}

// {"samples": [[pid, ms after the start, SM %, ms it stands for]], "tenures": [[from, to]]}; an
// open tenure ends at null.
void RunSession::RecordOffLeaseEvidence() {
  const OffLeaseMeter& meter = *off_lease_;
  result_.off_lease_gpu_ms = meter.seconds() * 1000;
  result_.off_lease_pid = meter.last_pid();
  auto ms = [&](int64_t us) { return std::round((us - meter.started_us()) / 100.0) / 10; };
  nlohmann::json samples = nlohmann::json::array(), tenures = nlohmann::json::array();
  for (const OffLeaseMeter::Counted& c : meter.counted())
    samples.push_back({c.sample.pid, ms(c.sample.end_us), c.sample.sm_percent, c.period_us / 1000});
  for (const auto& [from, to] : meter.tenures()) {
    tenures.push_back({ms(from), to == std::numeric_limits<int64_t>::max()
                                     ? nlohmann::json()
                                     : nlohmann::json(ms(to))});
  }
  result_.off_lease_evidence = {{"samples", std::move(samples)}, {"tenures", std::move(tenures)}};
}

RunSession::Step RunSession::KilledForOffLeaseUse() {
  if (result_.instruction_index < 0) result_.instruction_index = last_started_;
  char used[32];
  std::snprintf(used, sizeof used, "%.1f", off_lease_->seconds());
  char bound[32];
  std::snprintf(bound, sizeof bound, "%g", request_.off_lease_bound_seconds);
  return Killed(RunResult::Ending::kOffLease,
                std::string("the program's processes kept the GPU busy for ") + used +
                    " s while the request did not hold the GPU lease (the server allows " + bound +
                    " s, --off-lease-gpu-seconds): GPU work must run inside instructions that "
                    "hold the lease, not in threads or child processes left running across a "
                    "cpu_only run or a file transfer");
}

// Gated only under a lease of this run (a reserved job's span is its whole life).
RunSession::Step RunSession::OnSpanBegin() {
  if (lease_ && lease_->held() && !span_) {
    TakeCensus();  // outside the span: NVML's time is not the span's, nor the GPU's duty
    span_ = lease_->lease().BeginSpan();
    span_since_ = Clock::now();
    result_.span_wait_ms += ToMilliseconds(span_->waited);
    ++result_.spans;
  }
  return Grant(ipc::MessageType::kSpanGranted);
}

// Who else holds the GPU, just before and just after each span (gpu_census.h).
void RunSession::TakeCensus() {
  if (request_.census == nullptr) {
    result_.census_unavailable = request_.census_unavailable;
    return;
  }
  CensusReading reading = request_.census->Take(worker_.child.pid());
  if (!reading.meaningful) result_.census_unavailable = reading.reason_if_not;
  for (GpuHolder& holder : reading.foreign) {
    auto& seen = result_.foreign_gpu_holders;
    const bool known = std::any_of(seen.begin(), seen.end(),
                                   [&](const GpuHolder& h) { return h.pid == holder.pid; });
    if (!known) seen.push_back(std::move(holder));
  }
}

void RunSession::OnSpanEnd() {
  if (!span_) return;
  result_.housekeeping_beside_spans += lease_->lease().EndSpan(*span_);
  result_.span_held_ms += ToMilliseconds(Clock::now() - span_since_);
  span_.reset();
  TakeCensus();
}

RunSession::Step RunSession::OnInstruction(const ipc::Frame& frame) {
  StatusOr<ipc::ProgressMessage> progress = ipc::DecodeProgress(frame);
  const int64_t index = progress.ok() ? progress->index : -1;
  if (running_instruction_ >= 0 || index != last_started_ + 1) {
    return Killed(RunResult::Ending::kBroken,
                  "worker sent instruction " + std::to_string(index) + " out of order (after " +
                      std::to_string(last_started_) + "): user code forged the engine's frames");
  }
  running_instruction_ = last_started_ = result_.instruction_index = static_cast<int>(index);
  instruction_since_ = Clock::now();
  wait_before_instruction_ = lease_ ? lease_->wait_ms() : 0;
  return Step::kContinue;
}

RunSession::Step RunSession::OnInstructionEnd(const ipc::Frame& frame) {
  StatusOr<ipc::ProgressMessage> progress = ipc::DecodeProgress(frame);
  if (!progress.ok() || progress->index != running_instruction_) {
    return Killed(RunResult::Ending::kBroken, "worker ended an instruction it was not running (" +
                                                  std::to_string(running_instruction_) +
                                                  " runs): user code forged the engine's frames");
  }
  running_instruction_ = -1;
  if (result_.instruction_index >= 0 &&
      result_.instruction_times.size() < RunResult::kTimedInstructions) {
    const double wait = lease_ ? lease_->wait_ms() : 0;
    result_.instruction_times.push_back(
        {result_.instruction_index, ToMilliseconds(Clock::now() - instruction_since_),
         wait - wait_before_instruction_, lease_ ? lease_->held() : false});
  }
  result_.instruction_index = -1;
  return Step::kContinue;
}

RunSession::Step RunSession::OnOutcome(ipc::Frame& frame, Pipes& pipes) {
  StatusOr<ipc::OutcomeMessage> outcome = ipc::DecodeOutcome(frame);
  // At most one byte past the cap: a bigger outcome (a forged one may claim a terabyte) is
  // refused as too large by outcome_reply.cc, never held.
  auto size = FdSize(frame.fds[0].get());
  auto text = ReadFdHead(frame.fds[0].get(), request_.max_response_bytes + 1);
  if (!outcome.ok() || !size.ok() || !text.ok()) {
    return Fail(RunResult::Ending::kBroken, "unreadable outcome");
  }
  auto parts = SharedBytes::MapSealedMemfd(frame.fds[1].get());
  if (!parts.ok())
    return Killed(RunResult::Ending::kBroken, "result data: " + parts.status().message());
  // The worker flushed and switched its fds back before answering: its output is in the pipes.
  Drain(pipes.out_read.get(), result_.out, output_limit_);
  Drain(pipes.err_read.get(), result_.err, output_limit_);
  result_.outcome_bytes = *size;
  result_.outcome_json = std::move(*text);
  result_.parts = std::move(*parts);
  if (outcome->retire) result_.retire_reason = RetireReason(*outcome->retire);
  result_.gpu_access_detected_ns = outcome->gpu_access_detected_ns;
  result_.ending = RunResult::Ending::kOutcome;
  Settle();
  return Step::kDone;
}

RunSession::Step RunSession::Crashed() {
  worker_.child.KillTreeAndReap();
  std::string how = "worker exited (" + worker_.child.exit_description() + ")";
  if (worker_.cgroup != nullptr && worker_.cgroup->oom_killed()) {
    how = "worker killed by its memory limit (out of memory)";
  }
  return Fail(RunResult::Ending::kCrashed, how);
}

RunSession::Step RunSession::Killed(RunResult::Ending ending, std::string message) {
  worker_.child.KillTreeAndReap();
  return Fail(ending, std::move(message));
}

// The lease goes back after any kill: a killed holder tears its context down under it.
RunSession::Step RunSession::Fail(RunResult::Ending ending, std::string message) {
  Settle();
  result_.ending = ending;
  result_.message = std::move(message);
  return Step::kDone;
}

void RunSession::Settle() {
  OnSpanEnd();
  if (!lease_) return;
  lease_->Release();
  result_.lease_wait_ms = lease_->wait_ms();
  result_.lease_held_ms = lease_->held_ms();
  result_.lease_waited_for = std::move(lease_->waited_for());
}

}  // namespace kc::pool
