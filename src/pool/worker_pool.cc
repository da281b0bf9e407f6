#include "pool/worker_pool.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include "base/rounded.h"

namespace kc::pool {

namespace {

std::string RetireReason(const RunResult& run, bool request_limit) {
  switch (run.ending) {
    case RunResult::Ending::kTimedOut:
      return "timeout";
    case RunResult::Ending::kCrashed:
      return "crashed";
    case RunResult::Ending::kBroken:
      return "broken";
    case RunResult::Ending::kCancelled:
      return "cancelled";
    case RunResult::Ending::kOffLease:
      return "off_lease_gpu";
    case RunResult::Ending::kOutcome:
      if (!run.retire_reason.empty()) return run.retire_reason;  // poisoned_context, ...
      return request_limit ? "request_limit" : "";
  }
  return "";
}

EventLevel RetireLevel(const std::string& reason) {
  if (reason == "request_limit" || reason == "library_limit") return EventLevel::kInfo;
  if (reason == "timeout" || reason == "poisoned_context" || reason == "cancelled" ||
      reason == "sandbox_cleanup" || reason == "off_lease_gpu")
    return EventLevel::kWarning;
  return EventLevel::kError;
}

}  // namespace

WorkerPool::WorkerPool(PoolOptions options, EventSink& events)
    : options_(std::move(options)),
      events_(events),
      queue_(options_.max_queued_requests,
             [](std::shared_ptr<Job> job) { job->done(Busy(*job)); }) {}

WorkerPool::~WorkerPool() {
  Join();
}

JobResult WorkerPool::Busy(const Job& job) {
  JobResult result;
  result.queue_ms = MillisecondsSince(job.enqueued);
  return result;
}

Status WorkerPool::Start() {
  KC_ASSIGN_OR_RETURN(setup_, WorkerSetup::Create(options_.sandbox));
  std::vector<int> gpu_indices;
  std::vector<DeviceSpec> gpus;
  for (const DeviceSpec& spec : options_.devices) {
    if (spec.gpu_index < 0) continue;
    gpu_indices.push_back(spec.gpu_index);
    gpus.push_back(spec);
  }
  arbiter_ = std::make_unique<GpuArbiter>(gpu_indices, options_.housekeeping);
  if (!gpus.empty()) {
    reserved_ = std::make_unique<ReservedGpuJobs>(
        std::move(gpus), options_.launch, options_.spawn_timeout, *setup_, *arbiter_, events_);
  }
  for (const DeviceSpec& spec : options_.devices) {
    auto device =
        std::make_unique<DeviceWorkers>(spec, options_.launch, options_.use_zygote,
                                        options_.spawn_timeout, *setup_, *arbiter_, events_);
    KC_ASSIGN_OR_RETURN(nlohmann::json describe, device->Start());
    if (devices_.empty()) {
      describe_ = describe;
    } else if (describe.value("target", nlohmann::json()) !=
               describe_.value("target", nlohmann::json())) {
      return FailedPreconditionError("GPUs with different targets need separate servers");
    }
    devices_.push_back(std::move(device));
  }
  for (auto& device : devices_) {
    for (int i = 0; i < device->spec().seats; ++i) {
      std::string seat = device->spec().name + "/w" + std::to_string(seat_count_++);
      seats_.emplace_back([this, d = device.get(), seat] { SeatLoop(*d, seat); });
    }
  }
  return Status::Ok();
}

bool WorkerPool::Submit(std::shared_ptr<Job> job) {
  if (shutting_down_) return false;
  job->enqueued = Clock::now();
  job->wait_deadline = job->enqueued + options_.worker_wait_timeout;
  return queue_.Push(std::move(job));
}

size_t WorkerPool::Revoke(const std::function<bool(const Job&)>& revoked) {
  auto taken = queue_.TakeIf(revoked);
  for (auto& job : taken) {
    JobResult result = Busy(*job);
    result.revoked = true;
    job->done(std::move(result));
  }
  return taken.size();
}

PoolLoad WorkerPool::Load() const {
  PoolLoad load;
  load.request_capacity = shutting_down_ ? 0 : seat_count_;
  load.requests_in_progress = running_.load();
  load.requests_waiting = static_cast<int>(queue_.size());
  if (arbiter_) load.gpus = arbiter_->Activities();
  for (const auto& device : devices_)
    load.devices.push_back({device->spec().name, device->spec().seats, device->Count()});
  return load;
}

void WorkerPool::SeatLoop(DeviceWorkers& device, std::string seat) {
  std::unique_ptr<WorkerProcess> occupant;
  const JobQueue::SeatGroup group{device.spec().name, device.spec().seats,
                                  device.lease() != nullptr};
  while (auto job = queue_.Pop(group)) {
    ++running_;
    const auto started = Clock::now();
    device.SeatBusy();
    RunJob(device, seat, occupant, *job);
    device.SeatIdle();
    queue_.Charge(*job, MillisecondsSince(started) / 1000, group);
    --running_;
  }
}

void WorkerPool::RunJob(DeviceWorkers& device, const std::string& seat,
                        std::unique_ptr<WorkerProcess>& occupant, Job& job) {
  if (job.run.cancel != nullptr && job.run.cancel->raised()) {  // its client left while queued
    JobResult skipped = Busy(job);
    skipped.cancelled = true;
    job.done(std::move(skipped));
    return;
  }
  const auto started = Clock::now();
  job.run.share = job.share;
  if (job.gpu_count > 0) return RunReservedJob(seat, job, started);
  job.run.lease = device.lease();
  job.run.census = device.census();
  job.run.census_unavailable = device.census_unavailable();
  job.run.off_lease_bound_seconds = device.spec().off_lease_bound_seconds;
  job.run.lease_mode = job.run.lease != nullptr ? LeaseMode::kShared : LeaseMode::kNone;
  JobResult result;
  // A worker that died before it took the request (killed in stand-by, its
  // zygote gone) costs the request nothing: it goes to the next one.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (!occupant) occupant = device.TakeReady();
    if (!occupant) {
      job.done(Busy(job));
      return;
    }
    job.run.workspace = occupant->workspace().path().string();
    result.ran = true;
    result.queue_ms = MillisecondsBetween(job.enqueued, started);
    result.worker_id = seat;
    result.pid = occupant->pid();
    events_.Emit(EventLevel::kInfo, "request_routed",
                 {{"request_id", job.run.request_id},
                  {"worker_id", seat},
                  {"pid", occupant->pid()},
                  {"queue_ms", result.queue_ms}});
    if (options_.hooks != nullptr) options_.hooks->BeforeRun(job.run, occupant->workspace());
    result.run = occupant->Run(job.run);
    if (result.run.delivered) break;
    events_.Emit(EventLevel::kWarning, "worker_retired",
                 {{"worker_id", seat},
                  {"reason", "died_before_request"},
                  {"request_id", job.run.request_id}});
    device.Retire(std::move(occupant));
  }
  result.elapsed_ms = MillisecondsSince(started);
  if (!result.run.lease_waited_for.empty()) {  // what a GPU request waited for, and how long
    events_.Emit(EventLevel::kInfo, "lease_waited",
                 {{"request_id", job.run.request_id},
                  {"lease_wait_ms", result.run.lease_wait_ms},
                  {"holders", result.run.lease_waited_for}});
  }
  if (!result.run.instruction_times.empty()) {  // where the run's time and its lease went
    nlohmann::json instructions = nlohmann::json::array();
    for (const RunResult::InstructionTime& t : result.run.instruction_times)
      instructions.push_back({t.index, Rounded(t.ms), Rounded(t.lease_wait_ms), t.leased});
    events_.Emit(EventLevel::kInfo, "run_timeline",
                 {{"request_id", job.run.request_id},
                  {"lease_held_ms", result.run.lease_held_ms},
                  {"span_held_ms", result.run.span_held_ms},
                  {"instructions", std::move(instructions)}});
  }
  if (result.run.refused_releases > 0) {  // user code tried to give the lease back early
    events_.Emit(EventLevel::kWarning, "lease_release_refused",
                 {{"request_id", job.run.request_id}, {"count", result.run.refused_releases}});
  }
  if (result.run.off_lease_gpu_ms > 0) {  // its processes used the GPU while it held no lease
    events_.Emit(EventLevel::kWarning, "gpu_used_off_lease",
                 {{"request_id", job.run.request_id},
                  {"off_lease_gpu_ms", std::round(result.run.off_lease_gpu_ms)},
                  {"killed", result.run.ending == RunResult::Ending::kOffLease},
                  {"evidence", result.run.off_lease_evidence}});
  }
  if (result.run.span_wait_ms > 1) {  // a timing span waited for house-keeping
    events_.Emit(EventLevel::kInfo, "span_waited",
                 {{"request_id", job.run.request_id}, {"span_wait_ms", result.run.span_wait_ms}});
  }
  result.cancelled = result.run.ending == RunResult::Ending::kCancelled;
  if (result.run.gpu_access_detected_ns != 0 && device.lease() != nullptr) {
    auto holder = device.lease()->HolderAt(result.run.gpu_access_detected_ns);
    if (holder && *holder != job.run.request_id) result.interfered_request_id = holder;
  }

  const bool request_limit = options_.max_requests_per_worker > 0 && occupant &&
                             occupant->requests_served() >= options_.max_requests_per_worker;
  std::string reason = occupant ? RetireReason(result.run, request_limit) : "";
  const std::string request_id = job.run.request_id;
  const bool answered = result.run.ending == RunResult::Ending::kOutcome;
  // Respond first; retiring and cleaning up happen off the request's path.
  job.done(std::move(result));
  if (!occupant) return;
  if (options_.hooks != nullptr) options_.hooks->AfterRun(job.run, answered, occupant->workspace());
  if (reason.empty() && !occupant->workspace().Empty()) reason = "sandbox_cleanup";
  if (!reason.empty()) {
    events_.Emit(RetireLevel(reason), "worker_retired",
                 {{"worker_id", seat}, {"reason", reason}, {"request_id", request_id}});
    device.Retire(std::move(occupant));
  }
}

void WorkerPool::RunReservedJob(const std::string& seat, Job& job, Clock::time_point started) {
  JobResult result;
  result.ran = true;
  result.queue_ms = MillisecondsBetween(job.enqueued, started);
  result.worker_id = seat + "/reserved";
  events_.Emit(EventLevel::kInfo, "request_routed",
               {{"request_id", job.run.request_id},
                {"worker_id", result.worker_id},
                {"gpu_count", job.gpu_count},
                {"queue_ms", result.queue_ms}});
  ReservedRun reserved;
  if (reserved_) {
    reserved = reserved_->Run(job.run, job.gpu_count);
  } else {  // the route refuses gpu_count on a CPU server first
    reserved.run.ending = RunResult::Ending::kBroken;
    reserved.run.message = "gpu_count: this server has no GPUs to reserve";
  }
  result.run = std::move(reserved.run);
  result.gpu_ids = std::move(reserved.gpu_ids);
  result.pid = reserved.pid;
  result.elapsed_ms = MillisecondsSince(started);
  result.cancelled = result.run.ending == RunResult::Ending::kCancelled;
  job.done(std::move(result));
}

void WorkerPool::BeginShutdown() {
  shutting_down_ = true;
  queue_.Close();
}

void WorkerPool::Join() {
  BeginShutdown();
  for (auto& seat : seats_)
    seat.join();  // each finishes its running job
  seats_.clear();
  for (auto& device : devices_)
    device->Stop();
  devices_.clear();
  reserved_.reset();
  arbiter_.reset();
  setup_.reset();
}

}  // namespace kc::pool
