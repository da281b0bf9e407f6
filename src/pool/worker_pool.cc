#include "pool/worker_pool.h"

#include <unistd.h>

#include <cstdlib>

#include "pool/zygote.h"

namespace kc::pool {

namespace {

double MillisecondsSince(Clock::time_point start, Clock::time_point end = Clock::now()) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

std::string RetireReason(const RunResult& run, bool request_limit) {
  switch (run.ending) {
    case RunResult::Ending::kTimedOut: return "timeout";
    case RunResult::Ending::kCrashed: return "crashed";
    case RunResult::Ending::kBroken: return "broken";
    case RunResult::Ending::kOutcome: return request_limit ? "request_limit" : "";
  }
  return "";
}

}  // namespace

WorkerPool::WorkerPool(PoolOptions options, EventSink& events)
    : options_(std::move(options)),
      events_(events),
      queue_(options_.max_queued_requests,
             [](std::shared_ptr<Job> job) { job->done(Busy(*job)); }) {}

WorkerPool::~WorkerPool() { Join(); }

JobResult WorkerPool::Busy(const Job& job) {
  JobResult result;
  result.queue_ms = MillisecondsSince(job.enqueued);
  return result;
}

Status WorkerPool::Start() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kcoral-workspaces-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return InternalError("cannot create the workspace root");
  workspace_root_ = pattern;

  auto first = WorkerProcess::Start(options_.launch);
  if (!first.ok()) return first.status();
  KC_RETURN_IF_ERROR((*first)->AwaitReady(Clock::now() + options_.spawn_timeout)
                         .WithContext("first worker"));
  describe_ = (*first)->describe();
  events_.Emit(EventLevel::kInfo, "worker_ready", {{"device", options_.device}, {"pid", (*first)->pid()}});
  {
    std::lock_guard lock(ready_mu_);
    ready_.push_back(std::move(*first));
  }
  if (options_.use_zygote) {
    auto zygote = Zygote::Start(options_.launch, Clock::now() + options_.spawn_timeout);
    if (zygote.ok()) {
      zygote_ = std::move(*zygote);
    } else {
      events_.Emit(EventLevel::kWarning, "worker_failed",
                   {{"phase", "zygote"}, {"error", zygote.status().message()}});
    }
  }
  spawner_ = std::thread([this] { SpawnLoop(); });
  for (int i = 0; i < options_.seats; ++i) {
    seats_.emplace_back([this, i] { SeatLoop(i); });
  }
  return Status::Ok();
}

bool WorkerPool::Submit(std::shared_ptr<Job> job) {
  if (shutting_down_) return false;
  job->enqueued = Clock::now();
  job->wait_deadline = job->enqueued + options_.worker_wait_timeout;
  return queue_.Push(std::move(job));
}

PoolLoad WorkerPool::Load() const {
  PoolLoad load;
  load.request_capacity = shutting_down_ ? 0 : options_.seats;
  load.requests_in_progress = running_.load();
  load.requests_waiting = static_cast<int>(queue_.size());
  return load;
}

std::unique_ptr<WorkerProcess> WorkerPool::TakeReady() {
  std::unique_lock lock(ready_mu_);
  ready_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
  if (ready_.empty()) return nullptr;
  auto worker = std::move(ready_.front());
  ready_.pop_front();
  ready_cv_.notify_all();  // the spawner refills
  return worker;
}

void WorkerPool::SpawnLoop() {
  for (;;) {
    int need;
    {
      std::unique_lock lock(ready_mu_);
      ready_cv_.wait(lock, [&] {
        return stopping_ || static_cast<int>(ready_.size()) < options_.standby;
      });
      if (stopping_) return;
      need = options_.standby - static_cast<int>(ready_.size());
    }
    // Start them all at once (imports run in parallel), then collect.
    std::vector<std::unique_ptr<WorkerProcess>> starting;
    for (int i = 0; i < need; ++i) {
      auto worker = zygote_ ? zygote_->Fork() : WorkerProcess::Start(options_.launch);
      if (!worker.ok() && zygote_) {
        // A broken zygote is replaced by plain interpreter starts.
        events_.Emit(EventLevel::kError, "worker_failed", {{"phase", "zygote"}, {"error", worker.status().message()}});
        zygote_.reset();
        worker = WorkerProcess::Start(options_.launch);
      }
      if (worker.ok()) starting.push_back(std::move(*worker));
    }
    const auto deadline = Clock::now() + options_.spawn_timeout;
    bool failed = starting.size() < static_cast<size_t>(need);
    for (auto& worker : starting) {
      Status ready = worker->AwaitReady(deadline);
      if (!ready.ok()) {
        failed = true;
        events_.Emit(EventLevel::kError, "worker_failed", {{"phase", "startup"}, {"error", ready.message()}});
        continue;
      }
      events_.Emit(EventLevel::kInfo, "worker_ready", {{"device", options_.device}, {"pid", worker->pid()}});
      std::lock_guard lock(ready_mu_);
      ready_.push_back(std::move(worker));
      ready_cv_.notify_all();
    }
    if (failed) std::this_thread::sleep_for(std::chrono::seconds(1));  // don't spin on a broken setup
  }
}

void WorkerPool::SeatLoop(int index) {
  const std::string seat = options_.device + "/w" + std::to_string(index);
  std::unique_ptr<WorkerProcess> occupant;
  while (auto job = queue_.Pop()) {
    ++running_;
    RunJob(seat, occupant, *job);
    --running_;
  }
}

void WorkerPool::RunJob(const std::string& seat, std::unique_ptr<WorkerProcess>& occupant, Job& job) {
  if (!occupant) occupant = TakeReady();
  if (!occupant) {
    job.done(Busy(job));
    return;
  }
  const auto started = Clock::now();
  std::filesystem::path workspace = workspace_root_ / job.run.request_id;
  std::error_code ec;
  std::filesystem::create_directory(workspace, ec);
  std::filesystem::permissions(workspace, std::filesystem::perms::owner_all, ec);
  job.run.workspace = workspace.string();

  JobResult result;
  result.ran = true;
  result.queue_ms = MillisecondsSince(job.enqueued, started);
  result.worker_id = seat;
  result.pid = occupant->pid();
  events_.Emit(EventLevel::kInfo, "request_routed",
               {{"request_id", job.run.request_id}, {"worker_id", seat}, {"pid", occupant->pid()},
                {"queue_ms", result.queue_ms}});
  result.run = occupant->Run(job.run);
  result.elapsed_ms = MillisecondsSince(started);

  const bool request_limit = options_.max_requests_per_worker > 0 &&
                             occupant->requests_served() >= options_.max_requests_per_worker;
  const std::string reason = RetireReason(result.run, request_limit);
  // Respond first; retiring and cleaning up happen off the request's path.
  job.done(std::move(result));
  if (!reason.empty()) {
    auto level = reason == "request_limit" ? EventLevel::kInfo
                 : reason == "timeout"     ? EventLevel::kWarning
                                           : EventLevel::kError;
    events_.Emit(level, "worker_retired", {{"worker_id", seat}, {"reason", reason}});
    occupant.reset();  // kills the whole tree
  }
  std::filesystem::remove_all(workspace, ec);
}

void WorkerPool::BeginShutdown() {
  shutting_down_ = true;
  queue_.Close();
}

void WorkerPool::Join() {
  BeginShutdown();
  {
    std::lock_guard lock(ready_mu_);
    if (stopping_ && seats_.empty()) return;
  }
  for (auto& seat : seats_) seat.join();  // each finishes its running job
  seats_.clear();
  {
    std::lock_guard lock(ready_mu_);
    stopping_ = true;
    ready_cv_.notify_all();
  }
  if (spawner_.joinable()) spawner_.join();
  zygote_.reset();
  std::lock_guard lock(ready_mu_);
  ready_.clear();  // kills the stand-by processes
  std::error_code ec;
  if (!workspace_root_.empty()) std::filesystem::remove_all(workspace_root_, ec);
}

}  // namespace kc::pool
