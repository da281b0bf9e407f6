#include "pool/device_workers.h"

namespace kc::pool {

DeviceWorkers::DeviceWorkers(DeviceSpec spec, WorkerLaunch launch, bool use_zygote,
                             std::chrono::seconds spawn_timeout, WorkerSetup& setup,
                             GpuArbiter& arbiter, EventSink& events)
    : spec_(std::move(spec)),
      launch_([&] {
        if (!spec_.gpu_uuid.empty()) launch.env.push_back("CUDA_VISIBLE_DEVICES=" + spec_.gpu_uuid);
        for (const auto& e : spec_.extra_env)
          launch.env.push_back(e);
        launch.settings.gpu_arch = spec_.gpu_arch;
        return std::move(launch);
      }()),
      use_zygote_(use_zygote),
      spawn_timeout_(spawn_timeout),
      setup_(setup),
      events_(events),
      arbiter_(arbiter),
      lease_(spec_.gpu_index >= 0
                 ? std::make_unique<GpuLease>(arbiter, std::vector<int>{spec_.gpu_index})
                 : nullptr) {}

StatusOr<std::unique_ptr<WorkerProcess>> DeviceWorkers::Prepare(
    std::unique_ptr<WorkerProcess> worker, Clock::time_point deadline) {
  KC_RETURN_IF_ERROR(worker->AwaitReady(deadline));
  if (lease_) {
    KC_RETURN_IF_ERROR(
        Housekeeping(HousekeepingKind::kContext, [&] { return worker->Initialize(deadline); }));
    KC_RETURN_IF_ERROR(
        Housekeeping(HousekeepingKind::kKernels, [&] { return worker->WarmUp(deadline); }));
  }
  events_.Emit(EventLevel::kInfo, "worker_ready", {{"device", spec_.name}, {"pid", worker->pid()}});
  return worker;
}

StatusOr<std::unique_ptr<WorkerProcess>> DeviceWorkers::StartWorker() {
  KC_ASSIGN_OR_RETURN(PreparedWorker prepared, setup_.Prepare(spec_.device_nodes));
  RestartZygoteIfDue();
  StatusOr<std::unique_ptr<WorkerProcess>> worker = InternalError("no zygote");
  if (zygote_) {
    worker = zygote_->Fork(prepared.spec);
    if (!worker.ok()) {
      // A broken zygote is replaced by plain interpreter starts until it is restarted.
      events_.Emit(
          EventLevel::kError, "worker_failed",
          {{"device", spec_.name}, {"phase", "zygote"}, {"error", worker.status().message()}});
      zygote_.reset();
      next_zygote_start_ = Clock::now() + zygote_backoff_;
    }
  }
  if (!worker.ok()) worker = WorkerProcess::Start(launch_, prepared.spec);
  if (worker.ok()) (*worker)->Attach(std::move(prepared.resources));
  return worker;
}

void DeviceWorkers::RestartZygoteIfDue() {
  if (!use_zygote_ || (zygote_ && zygote_->alive()) || Clock::now() < next_zygote_start_) return;
  const bool restart = zygote_ != nullptr || next_zygote_start_ != Clock::time_point{};
  zygote_.reset();
  auto zygote = Zygote::Start(launch_, Clock::now() + spawn_timeout_);
  if (!zygote.ok()) {
    events_.Emit(EventLevel::kWarning, "worker_failed",
                 {{"device", spec_.name},
                  {"phase", "zygote"},
                  {"error", zygote.status().message()},
                  {"retry_in_s", zygote_backoff_.count()}});
    next_zygote_start_ = Clock::now() + zygote_backoff_;
    zygote_backoff_ = std::min(zygote_backoff_ * 2, std::chrono::seconds(60));
    return;
  }
  zygote_ = std::move(*zygote);
  zygote_backoff_ = std::chrono::seconds(1);
  if (restart) events_.Emit(EventLevel::kWarning, "zygote_restarted", {{"device", spec_.name}});
}

StatusOr<nlohmann::json> DeviceWorkers::Start() {
  if (lease_) {
    // Without NVML's process list every result says so (a condition); the GPU still serves.
    auto census = GpuCensus::ForGpu(spec_.gpu_uuid);
    if (census.ok()) {
      census_.emplace(std::move(*census));
    } else {
      census_unavailable_ = "the GPU's processes cannot be listed: " + census.status().message();
      events_.Emit(EventLevel::kWarning, "gpu_census_unavailable",
                   {{"device", spec_.name}, {"error", census.status().message()}});
    }
    if (spec_.off_lease_bound_seconds > 0 && !(census_ && census_->samples_use())) {
      return UnavailableError(
          "cannot watch " + spec_.name + "'s use off the GPU lease: " +
          (census_ ? "NVML lacks nvmlDeviceGetProcessUtilization" : census_unavailable_) +
          "; --off-lease-gpu-seconds 0 turns the watch off");
    }
  }
  const auto deadline = Clock::now() + spawn_timeout_;
  auto started = StartWorker();
  if (!started.ok()) return started.status();
  auto first = Prepare(std::move(*started), deadline);
  if (!first.ok()) return first.status().WithContext("first worker on " + spec_.name);
  nlohmann::json describe = (*first)->describe();
  {
    std::lock_guard lock(mu_);
    ready_.push_back(std::move(*first));
  }
  spawner_ = std::thread([this] { SpawnLoop(); });
  // Stand-by workers are prepared side by side: a CUDA context takes a
  // quarter of a second, mostly CPU in the new process.
  for (int i = 0; i < std::max(1, spec_.standby); ++i)
    preparers_.emplace_back([this] { PrepareLoop(); });
  return describe;
}

std::unique_ptr<WorkerProcess> DeviceWorkers::TakeReady() {
  for (;;) {
    std::unique_ptr<WorkerProcess> worker;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (ready_.empty()) return nullptr;
      worker = std::move(ready_.front());
      ready_.pop_front();
      cv_.notify_all();  // the spawner refills
    }
    if (worker->alive()) return worker;
    events_.Emit(EventLevel::kWarning, "worker_retired",
                 {{"device", spec_.name}, {"reason", "died_in_standby"}, {"pid", worker->pid()}});
    Retire(std::move(worker));
  }
}

Status DeviceWorkers::Housekeeping(HousekeepingKind kind, const std::function<Status()>& job) {
  arbiter_.BeginHousekeeping(spec_.gpu_index, kind);
  Status done = job();
  arbiter_.EndHousekeeping(spec_.gpu_index, kind);
  return done;
}

DeviceWorkers::Census DeviceWorkers::Count() {
  std::lock_guard lock(mu_);
  return {busy_.load(), static_cast<int>(ready_.size()),
          static_cast<int>(started_.size()) + preparing_, retiring_.load()};
}

void DeviceWorkers::Retire(std::unique_ptr<WorkerProcess> worker) {
  ++retiring_;
  struct Done {
    std::atomic<int>& count;
    ~Done() { --count; }
  } done{retiring_};
  if (!lease_) return;  // the tree dies with `worker`
  // A context destroyed; SIGKILL, as fast as any gentler exit (bench/standby_steps.py). It
  // cannot fail.
  (void)Housekeeping(HousekeepingKind::kContext, [&] {
    worker.reset();  // kills the whole tree
    return Status::Ok();
  });
}

void DeviceWorkers::SpawnLoop() {
  for (;;) {
    int need;
    {
      std::unique_lock lock(mu_);
      auto coming = [&] { return static_cast<int>(ready_.size() + started_.size()) + preparing_; };
      cv_.wait(lock, [&] { return stopping_ || coming() < spec_.standby; });
      if (stopping_) return;
      need = spec_.standby - coming();
    }
    // Forks take milliseconds; the preparers wait for the imports and the
    // contexts, so each worker is offered the moment it is ready.
    bool failed = false;
    for (int i = 0; i < need && !failed; ++i) {
      auto worker = StartWorker();
      if (!worker.ok()) {
        failed = true;
        continue;
      }
      std::lock_guard lock(mu_);
      started_.emplace_back(std::move(*worker), Clock::now() + spawn_timeout_);
      cv_.notify_all();
    }
    if (failed)
      std::this_thread::sleep_for(std::chrono::seconds(1));  // don't spin on a broken setup
  }
}

void DeviceWorkers::PrepareLoop() {
  for (;;) {
    std::unique_ptr<WorkerProcess> worker;
    Clock::time_point deadline;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !started_.empty(); });
      if (stopping_) return;
      std::tie(worker, deadline) = std::move(started_.front());
      started_.pop_front();
      ++preparing_;
    }
    auto prepared = Prepare(std::move(worker), deadline);
    std::unique_lock lock(mu_);
    --preparing_;
    cv_.notify_all();
    if (prepared.ok()) {
      ready_.push_back(std::move(*prepared));
      continue;
    }
    lock.unlock();
    events_.Emit(
        EventLevel::kError, "worker_failed",
        {{"device", spec_.name}, {"phase", "startup"}, {"error", prepared.status().message()}});
    std::this_thread::sleep_for(std::chrono::seconds(1));  // don't spin on a broken setup
  }
}

void DeviceWorkers::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (spawner_.joinable()) spawner_.join();
  for (auto& preparer : preparers_)
    preparer.join();
  preparers_.clear();
  zygote_.reset();
  std::lock_guard lock(mu_);
  started_.clear();
  ready_.clear();  // kills the stand-by processes
}

}  // namespace kc::pool
