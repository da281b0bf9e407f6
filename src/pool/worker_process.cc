#include "pool/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/hmac_sha256.h"
#include "ipc/frame.h"
#include "ipc/messages.h"
#include "pool/run_session.h"

namespace kc::pool {

namespace {

constexpr int kWorkerFd = 3;

}  // namespace

StatusOr<std::pair<ChildProcess, UniqueFd>> SpawnWithSocket(const WorkerLaunch& launch,
                                                            std::optional<ipc::WorkerSpec> worker) {
  UniqueFd server_end, child_end;
  KC_RETURN_IF_ERROR(ipc::MakeSocketPair(&server_end, &child_end));
  SpawnOptions options;
  options.argv = launch.argv;
  options.env = launch.env;
  options.env.push_back("KCORAL_WORKER_FD=" + std::to_string(kWorkerFd));
  options.fd_map = {{child_end.get(), kWorkerFd}};
  KC_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(options));
  // Queued on the socket until the interpreter reads it, first thing.
  KC_RETURN_IF_ERROR(ipc::SendFrame(server_end.get(), ipc::Encode(ipc::StartMessage{
                                                          launch.settings, std::move(worker)}))
                         .WithContext("sending the start message"));
  return std::make_pair(std::move(child), std::move(server_end));
}

StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(const WorkerLaunch& launch,
                                                              ipc::WorkerSpec spec) {
  KC_ASSIGN_OR_RETURN(auto spawned, SpawnWithSocket(launch, std::move(spec)));
  return Adopt(std::move(spawned.first), std::move(spawned.second));
}

Status WorkerProcess::AwaitReady(Clock::time_point deadline) {
  auto frame = ipc::ReceiveFrameBefore(socket_.get(), deadline);
  if (!frame.ok()) return frame.status().WithContext("waiting for the worker to be ready");
  if (ipc::TypeOf(*frame) == ipc::MessageType::kFailed) {
    KC_ASSIGN_OR_RETURN(ipc::FailedMessage failed, ipc::DecodeFailed(*frame));
    return FailedPreconditionError("worker could not start: " + failed.error);
  }
  if (ipc::TypeOf(*frame) != ipc::MessageType::kReady) {
    return InternalError("worker sent " + ipc::QuotedWord(*frame) + " before ready");
  }
  KC_ASSIGN_OR_RETURN(ipc::ReadyMessage ready, ipc::DecodeReady(*frame));
  describe_ = std::move(ready.describe);
  // Without its key nothing the worker seals could be checked: a worker that sends none is broken.
  std::optional<std::string> key = HexDecode(ready.seal_key);
  ::explicit_bzero(ready.seal_key.data(), ready.seal_key.size());
  if (!key || key->size() != kHmacSha256Bytes) {
    return InternalError("worker sent no valid seal_key in its ready frame");
  }
  seal_key_ = std::move(*key);
  return Status::Ok();
}

Status WorkerProcess::SetUpDevice(ipc::MessageType step, ipc::MessageType done,
                                  Clock::time_point deadline) {
  KC_RETURN_IF_ERROR(ipc::SendFrame(socket_.get(), ipc::Signal(step)));
  auto frame = ipc::ReceiveFrameBefore(socket_.get(), deadline);
  const std::string what(ipc::WordOf(step));
  if (!frame.ok()) return frame.status().WithContext("waiting for the worker's " + what);
  if (ipc::TypeOf(*frame) == done) return Status::Ok();
  StatusOr<ipc::FailedMessage> failed = ipc::DecodeFailed(*frame);
  return InternalError("worker failed to " + what + ": " +
                       (failed.ok() ? failed->error : ipc::QuotedWord(*frame)));
}

Status WorkerProcess::Initialize(Clock::time_point deadline) {
  return SetUpDevice(ipc::MessageType::kInitialize, ipc::MessageType::kInitialized, deadline);
}

Status WorkerProcess::WarmUp(Clock::time_point deadline) {
  return SetUpDevice(ipc::MessageType::kWarmUp, ipc::MessageType::kWarmedUp, deadline);
}

RunResult WorkerProcess::Run(const RunRequest& request) {
  ++requests_served_;
  return RunSession({child_, socket_.get(), &resources_.cgroup, seal_key_}, request).Run();
}

}  // namespace kc::pool
