#include "pool/zygote.h"

#include "ipc/frame.h"

namespace kc::pool {

namespace {

constexpr auto kForkTimeout = std::chrono::seconds(10);

}  // namespace

StatusOr<std::unique_ptr<Zygote>> Zygote::Start(const WorkerLaunch& launch,
                                                Clock::time_point deadline) {
  WorkerLaunch zygote_launch = launch;
  zygote_launch.argv.back() += ".zygote";  // python -m kcoral._worker.zygote
  KC_ASSIGN_OR_RETURN(auto spawned, SpawnWithSocket(zygote_launch));
  auto ready = ipc::ReceiveFrameBefore(spawned.second.get(), deadline);
  if (!ready.ok()) return ready.status().WithContext("waiting for the zygote to be ready");
  if (ready->type() != ipc::frame_type::kReady)
    return InternalError("zygote sent " + ready->type());
  return std::unique_ptr<Zygote>(new Zygote(std::move(spawned.first), std::move(spawned.second)));
}

StatusOr<std::unique_ptr<WorkerProcess>> Zygote::Fork(const nlohmann::json& spec) {
  UniqueFd server_end, worker_end;
  KC_RETURN_IF_ERROR(ipc::MakeSocketPair(&server_end, &worker_end));
  KC_RETURN_IF_ERROR(
      ipc::SendFrame(socket_.get(), {{"type", "fork"}, {"worker", spec}}, {worker_end.get()}));
  worker_end.Reset();
  auto forked = ipc::ReceiveFrameBefore(socket_.get(), Clock::now() + kForkTimeout);
  if (!forked.ok()) return forked.status().WithContext("waiting for the zygote to fork");
  if (forked->type() != "forked" || !forked->header.contains("pid"))
    return InternalError("zygote sent " + forked->type());
  const pid_t pid = forked->header["pid"].get<pid_t>();
  const pid_t init = forked->header.value("namespace_init", pid_t{-1});
  return WorkerProcess::Adopt(
      init > 0 ? ChildProcess::AdoptNamespace(init, pid) : ChildProcess::Adopt(pid),
      std::move(server_end));
}

}  // namespace kc::pool
