#include "pool/zygote.h"

#include "ipc/frame.h"
#include "ipc/messages.h"

namespace kc::pool {

namespace {

constexpr auto kForkTimeout = std::chrono::seconds(10);

}  // namespace

StatusOr<std::unique_ptr<Zygote>> Zygote::Start(const WorkerLaunch& launch,
                                                Clock::time_point deadline) {
  WorkerLaunch zygote_launch = launch;
  zygote_launch.argv.back() += ".zygote";  // python -m kcoral._worker.zygote
  KC_ASSIGN_OR_RETURN(auto spawned, SpawnWithSocket(zygote_launch, std::nullopt));
  auto ready = ipc::ReceiveFrameBefore(spawned.second.get(), deadline);
  if (!ready.ok()) return ready.status().WithContext("waiting for the zygote to be ready");
  KC_RETURN_IF_ERROR(ipc::DecodeReady(*ready).status().WithContext("the zygote"));
  return std::unique_ptr<Zygote>(new Zygote(std::move(spawned.first), std::move(spawned.second)));
}

StatusOr<std::unique_ptr<WorkerProcess>> Zygote::Fork(const ipc::WorkerSpec& spec) {
  UniqueFd server_end, worker_end;
  KC_RETURN_IF_ERROR(ipc::MakeSocketPair(&server_end, &worker_end));
  KC_RETURN_IF_ERROR(
      ipc::SendFrame(socket_.get(), ipc::Encode(ipc::ForkMessage{spec}), {worker_end.get()}));
  worker_end.Reset();
  auto frame = ipc::ReceiveFrameBefore(socket_.get(), Clock::now() + kForkTimeout);
  if (!frame.ok()) return frame.status().WithContext("waiting for the zygote to fork");
  StatusOr<ipc::ForkedMessage> forked = ipc::DecodeForked(*frame);
  if (!forked.ok()) return forked.status().WithContext("the zygote");
  const auto pid = static_cast<pid_t>(forked->pid);
  const auto init = static_cast<pid_t>(forked->namespace_init.value_or(-1));
  return WorkerProcess::Adopt(
      init > 0 ? ChildProcess::AdoptNamespace(init, pid) : ChildProcess::Adopt(pid),
      std::move(server_end));
}

}  // namespace kc::pool
