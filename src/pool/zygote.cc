#include "pool/zygote.h"

#include <poll.h>

#include <cerrno>

#include "ipc/frame.h"

namespace kc::pool {

namespace {

constexpr int kZygoteFd = 3;
constexpr int kForkTimeoutMs = 10000;

Status AwaitReadable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0) return DeadlineExceededError("the zygote did not answer in time");
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Zygote>> Zygote::Start(const WorkerLaunch& launch,
                                                Clock::time_point deadline) {
  UniqueFd server_end, zygote_end;
  KC_RETURN_IF_ERROR(ipc::MakeSocketPair(&server_end, &zygote_end));
  SpawnOptions options;
  options.argv = launch.argv;
  options.argv.back() += ".zygote";  // python -m kcoral._worker.zygote
  options.env = launch.env;
  options.env.push_back("KCORAL_WORKER_FD=" + std::to_string(kZygoteFd));
  options.fd_map = {{zygote_end.get(), kZygoteFd}};
  KC_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(options));
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  KC_RETURN_IF_ERROR(
      AwaitReadable(server_end.get(), static_cast<int>(std::max<int64_t>(0, left.count()))));
  KC_ASSIGN_OR_RETURN(ipc::Frame ready, ipc::ReceiveFrame(server_end.get()));
  if (ready.type() != ipc::frame_type::kReady) return InternalError("zygote sent " + ready.type());
  return std::unique_ptr<Zygote>(new Zygote(std::move(child), std::move(server_end)));
}

StatusOr<std::unique_ptr<WorkerProcess>> Zygote::Fork() {
  UniqueFd server_end, worker_end;
  KC_RETURN_IF_ERROR(ipc::MakeSocketPair(&server_end, &worker_end));
  KC_RETURN_IF_ERROR(ipc::SendFrame(socket_.get(), {{"type", "fork"}}, {worker_end.get()}));
  worker_end.Reset();
  KC_RETURN_IF_ERROR(AwaitReadable(socket_.get(), kForkTimeoutMs));
  KC_ASSIGN_OR_RETURN(ipc::Frame forked, ipc::ReceiveFrame(socket_.get()));
  if (forked.type() != "forked" || !forked.header.contains("pid"))
    return InternalError("zygote sent " + forked.type());
  return WorkerProcess::Adopt(ChildProcess::Adopt(forked.header["pid"].get<pid_t>()),
                              std::move(server_end));
}

}  // namespace kc::pool
