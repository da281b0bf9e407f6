#include "pool/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/hmac_sha256.h"
#include "base/memfd.h"
#include "ipc/frame.h"

namespace kc::pool {

namespace {

constexpr int kWorkerFd = 3;

// Reads what is available from a capture pipe, keeping the head.
// Returns false at end of file.
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

int MillisecondsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

}  // namespace

StatusOr<std::pair<ChildProcess, UniqueFd>> SpawnWithSocket(const WorkerLaunch& launch) {
  UniqueFd server_end, child_end;
  KC_RETURN_IF_ERROR(ipc::MakeSocketPair(&server_end, &child_end));
  SpawnOptions options;
  options.argv = launch.argv;
  options.env = launch.env;
  options.env.push_back("KCORAL_WORKER_FD=" + std::to_string(kWorkerFd));
  options.fd_map = {{child_end.get(), kWorkerFd}};
  KC_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(options));
  return std::make_pair(std::move(child), std::move(server_end));
}

WorkerLaunch WithSpec(WorkerLaunch launch, const nlohmann::json& spec) {
  launch.env.push_back("KCORAL_WORKER_SPEC=" + spec.dump());
  return launch;
}

StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(const WorkerLaunch& launch) {
  KC_ASSIGN_OR_RETURN(auto spawned, SpawnWithSocket(launch));
  return Adopt(std::move(spawned.first), std::move(spawned.second));
}

Status WorkerProcess::AwaitReady(Clock::time_point deadline) {
  auto frame_or = ipc::ReceiveFrameBefore(socket_.get(), deadline);
  if (!frame_or.ok()) return frame_or.status().WithContext("waiting for the worker to be ready");
  ipc::Frame& frame = *frame_or;
  if (frame.type() == ipc::frame_type::kFailed) {
    return FailedPreconditionError("worker could not start: " +
                                   frame.StringField("error").value_or("(no reason)"));
  }
  if (frame.type() != ipc::frame_type::kReady)
    return InternalError("worker sent " + frame.type() + " before ready");
  describe_ = frame.header.value("describe", nlohmann::json::object());
  if (!describe_.is_object()) return InternalError("worker sent a describe that is not an object");
  // Without its key nothing the worker seals could be checked: a worker that sends none is broken.
  std::optional<std::string> key = HexDecode(frame.StringField("seal_key").value_or(""));
  if (!key || key->size() != kHmacSha256Bytes) {
    return InternalError("worker sent no valid seal_key in its ready frame");
  }
  seal_key_ = std::move(*key);
  return Status::Ok();
}

Status WorkerProcess::Initialize(Clock::time_point deadline) {
  KC_RETURN_IF_ERROR(ipc::SendFrame(socket_.get(), {{"type", ipc::frame_type::kInitialize}}));
  auto frame_or = ipc::ReceiveFrameBefore(socket_.get(), deadline);
  if (!frame_or.ok()) return frame_or.status().WithContext("waiting for CUDA initialization");
  ipc::Frame& frame = *frame_or;
  if (frame.type() != ipc::frame_type::kInitialized) {
    return InternalError("worker failed to initialize: " +
                         frame.StringField("error").value_or(frame.type()));
  }
  return Status::Ok();
}

RunResult WorkerProcess::Run(const RunRequest& request) {
  RunResult result;
  result.seal_key = seal_key_;
  ++requests_served_;
  // The lease is arbitrated here; whatever ends the run, it is released after
  // the worker is dead or done (a killed holder tears its context down under it).
  bool held = false, in_span = false;
  Clock::time_point held_since, span_since, instruction_since;
  double wait_before_instruction = 0;  // result.lease_wait_ms when the instruction began
  GpuArbiter::SpanStart span;
  auto end_span = [&] {
    if (!in_span) return;
    result.housekeeping_beside_spans += request.lease->EndSpan(span);
    result.span_held_ms +=
        std::chrono::duration<double, std::milli>(Clock::now() - span_since).count();
    in_span = false;
  };
  auto release = [&] {
    end_span();
    if (!held) return;
    request.lease->Release();
    result.lease_held_ms +=
        std::chrono::duration<double, std::milli>(Clock::now() - held_since).count();
    held = false;
  };
  auto fail = [&](RunResult::Ending ending, std::string message) {
    release();  // after any kill
    result.ending = ending;
    result.message = std::move(message);
    return result;
  };

  auto program = MakeSealedMemfd("kcoral-program", request.program_json);
  auto out_pipe = MakeCapturePipe();
  auto err_pipe = MakeCapturePipe();
  if (!program.ok() || !out_pipe.ok() || !err_pipe.ok()) {
    return fail(RunResult::Ending::kBroken, "cannot prepare the request for the worker");
  }
  nlohmann::json header = {{"type", ipc::frame_type::kRun},
                           {"request_id", request.request_id},
                           {"workspace", request.workspace},
                           {"output_limit_bytes", request.output_limit_bytes},
                           {"max_response_bytes", request.max_response_bytes},
                           {"blobs", nlohmann::json::array()}};
  std::vector<int> fds = {program->get(), out_pipe->write.get(), err_pipe->write.get()};
  for (const BlobFd& blob : request.blobs) {
    header["blobs"].push_back(blob.sha256);
    fds.push_back(blob.fd);
  }
  if (Status sent = ipc::SendFrame(socket_.get(), header, fds); !sent.ok()) {
    result.delivered = false;
    return fail(RunResult::Ending::kCrashed, "worker exited before the request: " + sent.message());
  }
  // Only the worker may hold the write ends now, so EOF means it is gone.
  out_pipe->write.Reset();
  err_pipe->write.Reset();

  const size_t limit = static_cast<size_t>(std::max<int64_t>(0, request.output_limit_bytes));
  auto deadline = Clock::now() + request.timeout;

  // A death is seen through the pidfd, at once: a child of the worker may
  // hold the socket (and the pipes) open long after.
  auto crashed = [&] {
    child_.KillTreeAndReap();
    std::string how = "worker exited (" + child_.exit_description() + ")";
    if (resources_.cgroup.oom_killed()) how = "worker killed by its memory limit (out of memory)";
    return fail(RunResult::Ending::kCrashed, how);
  };
  pollfd polls[5] = {{socket_.get(), POLLIN, 0},
                     {out_pipe->read.get(), POLLIN, 0},
                     {err_pipe->read.get(), POLLIN, 0},
                     {request.cancel != nullptr ? request.cancel->fd() : -1, POLLIN, 0},
                     {child_.pidfd(), POLLIN, 0}};
  for (;;) {
    int rc = ::poll(polls, 5, MillisecondsLeft(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      child_.KillTreeAndReap();
      return fail(RunResult::Ending::kTimedOut, "execution timed out");
    }
    for (int i = 1; i < 3; ++i) {
      if (polls[i].fd >= 0 && polls[i].revents) {
        if (!Drain(polls[i].fd, i == 1 ? result.out : result.err, limit)) polls[i].fd = -1;
      }
    }
    if (polls[3].revents) {
      child_.KillTreeAndReap();
      return fail(RunResult::Ending::kCancelled, "the client closed the connection");
    }
    if (!polls[0].revents) {
      if (polls[4].revents) return crashed();  // frames it sent before dying are read first
      continue;
    }
    auto frame = ipc::ReceiveFrame(socket_.get());
    if (!frame.ok()) return crashed();
    const std::string type = frame->type();
    if (type == ipc::frame_type::kSpanBegin) {
      // Gated only under a lease of this run (a reserved job's span is its whole life).
      if (held && !in_span && !request.gpus_held) {
        span = request.lease->BeginSpan();
        span_since = Clock::now();
        result.span_wait_ms += std::chrono::duration<double, std::milli>(span.waited).count();
        ++result.spans;
        in_span = true;
      }
      if (!ipc::SendFrame(socket_.get(), {{"type", ipc::frame_type::kSpanGranted}}).ok())
        return crashed();
    } else if (type == ipc::frame_type::kSpanEnd) {
      end_span();
    } else if (type == ipc::frame_type::kLeaseAcquire && request.gpus_held) {
      if (!ipc::SendFrame(socket_.get(), {{"type", ipc::frame_type::kLeaseGranted}}).ok())
        return crashed();
    } else if (type == ipc::frame_type::kLeaseRelease && request.gpus_held) {
      // the reservation outlives the run; its holder gives it back
    } else if (type == ipc::frame_type::kLeaseAcquire && request.lease != nullptr) {
      if (!held) {
        const auto asked = Clock::now();
        request.lease->Acquire(request.request_id);
        held = true;
        held_since = Clock::now();
        if (held_since - asked > std::chrono::milliseconds(1)) {
          auto ns = [](Clock::time_point t) {
            return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch())
                .count();
          };
          for (std::string& holder : request.lease->HoldersBetween(ns(asked), ns(held_since))) {
            if (holder != request.request_id) result.lease_waited_for.push_back(std::move(holder));
          }
        }
        deadline += held_since - asked;  // lease waits never consume the budget
        result.lease_wait_ms +=
            std::chrono::duration<double, std::milli>(held_since - asked).count();
      }
      if (!ipc::SendFrame(socket_.get(), {{"type", ipc::frame_type::kLeaseGranted}}).ok())
        return crashed();
    } else if (type == ipc::frame_type::kLeaseRelease && request.lease != nullptr) {
      release();
    } else if (type == ipc::frame_type::kInstruction) {
      const std::optional<int64_t> index = frame->IntField("index");
      result.instruction_index =
          index && *index >= 0 && *index <= INT32_MAX ? static_cast<int>(*index) : -1;
      instruction_since = Clock::now();
      wait_before_instruction = result.lease_wait_ms;
    } else if (type == ipc::frame_type::kInstructionEnd) {
      if (result.instruction_index >= 0 &&
          result.instruction_times.size() < RunResult::kTimedInstructions) {
        result.instruction_times.push_back(
            {result.instruction_index,
             std::chrono::duration<double, std::milli>(Clock::now() - instruction_since).count(),
             result.lease_wait_ms - wait_before_instruction, held});
      }
      result.instruction_index = -1;
    } else if (type == ipc::frame_type::kOutcome && frame->fds.size() == 2) {
      // At most one byte past the cap: a bigger outcome (a forged one may claim
      // a terabyte) is refused as too large by outcome_reply.cc, never held.
      auto outcome_size = FdSize(frame->fds[0].get());
      if (!outcome_size.ok()) return fail(RunResult::Ending::kBroken, "unreadable outcome");
      result.outcome_bytes = *outcome_size;
      auto outcome = ReadFdHead(frame->fds[0].get(), request.max_response_bytes + 1);
      auto parts = SharedBytes::MapSealedMemfd(frame->fds[1].get());
      if (!outcome.ok()) return fail(RunResult::Ending::kBroken, "unreadable outcome");
      if (!parts.ok()) {
        child_.KillTreeAndReap();
        return fail(RunResult::Ending::kBroken, "result data: " + parts.status().message());
      }
      // The worker flushed and switched its fds back before answering, so
      // everything it wrote is already in the pipes.
      Drain(out_pipe->read.get(), result.out, limit);
      Drain(err_pipe->read.get(), result.err, limit);
      result.outcome_json = std::move(*outcome);
      result.parts = std::move(*parts);
      // The reasons a worker gives (engine.py); any other text is named here,
      // so that no worker text reaches event fields or metric labels.
      if (frame->header.contains("retire")) {
        const std::string reason = frame->StringField("retire").value_or("");
        result.retire_reason =
            reason == "poisoned_context" || reason == "library_limit" ? reason : "worker_asked";
      }
      result.gpu_access_detected_ns = frame->IntField("gpu_access_detected_ns").value_or(0);
      result.ending = RunResult::Ending::kOutcome;
      release();
      return result;
    } else {
      child_.KillTreeAndReap();
      // The type is the worker's text (up to a 64 KiB header): only its start is quoted.
      return fail(RunResult::Ending::kBroken,
                  "worker sent an unexpected " + type.substr(0, 64) + " frame");
    }
  }
}

}  // namespace kc::pool
