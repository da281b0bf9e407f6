#include "pool/reserved_gpu_job.h"

#include <algorithm>

#include "pool/gpu_lease.h"
#include "pool/lease_account.h"

namespace kc::pool {

namespace {

// Launcher variables of distributed runs describe the server's own launch, not
// this job's: a program that reads them would join the wrong group.
bool IsLauncherVariable(std::string_view entry) {
  static constexpr std::string_view kNames[] = {
      "RANK=",      "WORLD_SIZE=",      "LOCAL_RANK=",  "LOCAL_WORLD_SIZE=", "GROUP_RANK=",
      "ROLE_RANK=", "ROLE_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=",      "TORCHELASTIC_"};
  return std::any_of(std::begin(kNames), std::end(kNames),
                     [&](std::string_view name) { return entry.rfind(name, 0) == 0; });
}

}  // namespace

WorkerLaunch ReservedGpuJobs::LaunchFor(const std::vector<const DeviceSpec*>& chosen) const {
  WorkerLaunch launch = launch_;
  std::erase_if(launch.env, [](const std::string& e) { return IsLauncherVariable(e); });
  std::string visible;
  for (const DeviceSpec* gpu : chosen)
    visible += (visible.empty() ? "" : ",") + gpu->gpu_uuid;
  launch.env.push_back("CUDA_VISIBLE_DEVICES=" + visible);
  for (const auto& e : chosen.front()->extra_env)  // one target per server (worker_pool.cc)
    launch.env.push_back(e);
  launch.settings.gpu_arch = chosen.front()->gpu_arch;
  return launch;
}

StatusOr<std::unique_ptr<WorkerProcess>> ReservedGpuJobs::StartWorker(
    const std::vector<const DeviceSpec*>& chosen) {
  std::vector<std::string> nodes;
  for (const DeviceSpec* gpu : chosen) {
    for (const std::string& node : gpu->device_nodes) {
      if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
    }
  }
  KC_ASSIGN_OR_RETURN(PreparedWorker prepared, setup_.Prepare(nodes));
  KC_ASSIGN_OR_RETURN(auto worker, WorkerProcess::Start(LaunchFor(chosen), prepared.spec));
  worker->Attach(std::move(prepared.resources));
  const auto deadline = Clock::now() + spawn_timeout_;
  KC_RETURN_IF_ERROR(worker->AwaitReady(deadline));
  KC_RETURN_IF_ERROR(worker->Initialize(deadline));  // on GPUs that are ours alone
  return worker;
}

std::vector<const DeviceSpec*> ReservedGpuJobs::SpecsOf(const std::vector<int>& ids) const {
  std::vector<const DeviceSpec*> chosen;
  for (int id : ids) {
    chosen.push_back(&*std::find_if(gpus_.begin(), gpus_.end(),
                                    [&](const DeviceSpec& gpu) { return gpu.gpu_index == id; }));
  }
  return chosen;
}

ReservedRun ReservedGpuJobs::Run(RunRequest request, int gpu_count) {
  ReservedRun reserved;
  RunResult& run = reserved.run;
  auto chosen_ids = arbiter_.Choose(gpu_count);
  if (!chosen_ids.ok()) {  // the route checks gpu_count against the GPUs first
    run.ending = RunResult::Ending::kBroken;
    run.message = chosen_ids.status().message();
    return reserved;
  }
  GpuLease lease(arbiter_, *chosen_ids);
  LeaseAccount account(lease, request.request_id, request.share);
  const bool granted =
      account.Acquire([&] { return request.cancel != nullptr && request.cancel->raised(); });
  if (!granted) {
    run.lease_wait_ms = account.wait_ms();
    run.ending = RunResult::Ending::kCancelled;
    run.message = "the client closed the connection";
    return reserved;
  }
  // One span for the job's whole life: no neighbour's house-keeping on its GPUs either.
  const GpuArbiter::SpanStart span = lease.BeginSpan(GpuArbiter::SpanKind::kReservation);
  reserved.gpu_ids = *chosen_ids;
  events_.Emit(EventLevel::kInfo, "gpus_reserved",
               {{"request_id", request.request_id},
                {"gpu_ids", reserved.gpu_ids},
                {"lease_wait_ms", account.wait_ms()}});
  RunOnWorker(request, SpecsOf(*chosen_ids), reserved);
  lease.EndSpan(span);
  account.Release();
  run.span_wait_ms = ToMilliseconds(span.waited);
  run.lease_wait_ms = account.wait_ms();
  run.lease_held_ms = account.held_ms();
  run.lease_waited_for = std::move(account.waited_for());
  events_.Emit(EventLevel::kInfo, "gpus_released",
               {{"request_id", request.request_id},
                {"gpu_ids", reserved.gpu_ids},
                {"lease_held_ms", run.lease_held_ms}});
  return reserved;
}

void ReservedGpuJobs::RunOnWorker(RunRequest& request, const std::vector<const DeviceSpec*>& chosen,
                                  ReservedRun& reserved) {
  auto worker = StartWorker(chosen);
  if (!worker.ok()) {
    reserved.run.ending = RunResult::Ending::kCrashed;
    reserved.run.message = "the job's worker could not start: " + worker.status().message();
    return;
  }
  reserved.pid = (*worker)->pid();
  request.workspace = (*worker)->workspace().path().string();
  request.lease_mode = LeaseMode::kReserved;
  request.lease = nullptr;
  reserved.run = (*worker)->Run(request);
  worker->reset();  // the whole tree, and its CUDA contexts, before the GPUs go back
}

}  // namespace kc::pool
