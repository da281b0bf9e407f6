#include "server/execute/execute_route.h"

#include <chrono>
#include <unordered_map>
#include <variant>

#include "pool/worker_pool.h"
#include "protocol/cuda_code.h"
#include "protocol/execute_request.h"
#include "server/core/request_id.h"
#include "server/core/server_config.h"
#include "server/execute/admitted_request.h"
#include "server/execute/outcome_reply.h"
#include "server/status/event_log.h"
#include "server/status/request_accounting.h"
#include "server/status/request_ring.h"
#include "server/tenancy/access_control.h"
#include "server/tenancy/tenant_quotas.h"
#include "store/blob_store.h"

namespace kc::server {

namespace {

nlohmann::json ProgramShape(const protocol::Program& program) {
  static const char* kKinds[] = {"module", "tensor", "bytes", "file", "library"};
  nlohmann::json ops = nlohmann::json::object(), uploads = nlohmann::json::object();
  for (const auto& ins : program.instructions) {
    const std::string op(protocol::OpName(ins.op));
    ops[op] = ops.value(op, 0) + 1;
    if (ins.op == protocol::Op::kUpload) {
      const char* kind = kKinds[static_cast<int>(ins.upload_kind)];
      uploads[kind] = uploads.value(kind, 0) + 1;
    }
  }
  return {{"instructions", program.instructions.size()}, {"ops", ops}, {"uploads", uploads}};
}

// The dashboard's view of a run (request_ring.h): its lease, and the run_timeline event's
// instructions with their ops and ids.
RunNote NoteOf(const pool::JobResult& result, const protocol::Program& program) {
  RunNote note{result.worker_id,         result.queue_ms,         result.run.lease_wait_ms,
               result.run.lease_held_ms, result.run.span_held_ms, {}};
  for (const pool::RunResult::InstructionTime& t : result.run.instruction_times) {
    TimelineStep step{
        .index = t.index, .ms = t.ms, .lease_wait_ms = t.lease_wait_ms, .leased = t.leased};
    if (t.index >= 0 && static_cast<size_t>(t.index) < program.instructions.size()) {
      const protocol::Instruction& instruction = program.instructions[t.index];
      step.op = protocol::OpName(instruction.op);
      step.id = instruction.op == protocol::Op::kReturn ? instruction.key : instruction.id;
    }
    note.timeline.push_back(std::move(step));
  }
  return note;
}

}  // namespace

std::vector<std::string_view> SuppliedRequestIds(const http::fields& fields) {
  std::vector<std::string_view> ids;
  auto [begin, end] = fields.equal_range("X-Request-ID");
  for (auto it = begin; it != end; ++it)
    ids.push_back(it->value());
  return ids;
}

net::awaitable<HttpReply> ExecuteRoute::Handle(ExecuteArrival arrival,
                                               StatusOr<std::unique_ptr<ExecuteIngest>> body,
                                               std::shared_ptr<pool::CancelFlag> cancel) {
  const std::string& request_id = arrival.request_id;
  // Whose request (none without keys), and what that tenant may use (tenant_limits.h).
  const std::string tenant = arrival.caller ? arrival.caller->tenant : "";
  const TenantLimits limits = services_.access.LimitsOf(tenant);
  if (arrival.caller) services_.events.NameTenant(request_id, tenant);
  ++services_.state.in_flight;
  struct InFlight {
    std::atomic<int>& count;
    ~InFlight() { --count; }
  } in_flight{services_.state.in_flight};
  services_.events.Emit(EventLevel::kInfo, "request_received",
                        {{"request_id", request_id},
                         {"client", arrival.client},
                         {"content_length", arrival.body_bytes}});
  services_.requests.Begin(tenant);
  auto finish = [&](HttpReply reply) {
    return Finish(std::move(reply), request_id, tenant, arrival.received);
  };

  if (auto refusal = RefuseUnread(arrival, tenant, limits)) co_return finish(std::move(*refusal));

  // The checks that need the whole body, validation and cache look-ups: on
  // the parse pool (the body itself was hashed and stored as it arrived).
  // Copies: the screening must not outlive what it reads.
  auto screening = OnPool(services_.cpu_pool,
                          [this, body = std::move(body), request_id, tenant, limits]() mutable {
                            return Screen(std::move(body), request_id, tenant, limits);
                          });
  std::variant<HttpReply, AdmittedRequest> screened = co_await std::move(screening);
  if (auto* reply = std::get_if<HttpReply>(&screened)) co_return finish(std::move(*reply));

  auto admitted = std::make_shared<AdmittedRequest>(std::get<AdmittedRequest>(std::move(screened)));
  auto entering = EnterQuotas(tenant, limits, request_id);
  if (auto refusal = co_await std::move(entering)) co_return finish(std::move(*refusal));
  struct Admitted {  // counted in flight until answered
    TenantQuotas& quotas;
    const std::string& tenant;
    ~Admitted() { quotas.Leave(tenant); }
  } counted{services_.quotas, tenant};
  admitted->share = {tenant, limits.weight};
  if (arrival.caller) admitted->key_id = arrival.caller->key_id;
  nlohmann::json accepted = ProgramShape(admitted->request.program);
  accepted["request_id"] = request_id;
  accepted["timeout_seconds"] = admitted->timeout_seconds;
  services_.events.Emit(EventLevel::kInfo, "request_accepted", accepted);

  if (cluster_ != nullptr) {
    auto routing = cluster_->Route(admitted, request_id, arrival.idempotency_key, cancel);
    co_return finish(co_await std::move(routing));
  }
  auto running = RunHere(admitted, request_id, std::move(cancel));
  co_return finish(co_await std::move(running));
}

std::optional<HttpReply> ExecuteRoute::RefuseUnread(const ExecuteArrival& arrival,
                                                    const std::string& tenant,
                                                    const TenantLimits& limits) const {
  if (services_.state.shutting_down) {
    return EndingReply(RequestEnding::kShuttingDown, "server is shutting down", arrival.request_id);
  }
  if (limits.max_request_bytes &&
      arrival.body_bytes > static_cast<uint64_t>(*limits.max_request_bytes)) {
    return EndingReply(RequestEnding::kRequestTooLarge,
                       "request body of " + std::to_string(arrival.body_bytes) +
                           " bytes exceeds tenant '" + tenant + "' limit max_request_bytes " +
                           std::to_string(*limits.max_request_bytes),
                       arrival.request_id);
  }
  return std::nullopt;
}

net::awaitable<std::optional<HttpReply>> ExecuteRoute::EnterQuotas(std::string tenant,
                                                                   TenantLimits limits,
                                                                   std::string request_id) {
  // The seat queue is scanned only for a tenant with a `queued` limit: off every other request.
  int queued = 0;
  if (limits.queued) {
    const auto waiting = services_.pool.WaitingByTenant();
    if (auto it = waiting.find(tenant); it != waiting.end()) queued = it->second;
  }
  // In a cluster a seconds budget is read from the cluster's ledger (a NATS round trip).
  auto entering =
      ClusterCall(services_, [&] { return services_.quotas.Enter(tenant, limits, queued); });
  auto refusal = co_await std::move(entering);
  if (!refusal) co_return std::nullopt;
  HttpReply reply = EndingReply(RequestEnding::kQuotaExceeded, refusal->message, request_id);
  reply.headers.emplace_back("Retry-After", std::to_string(refusal->retry_after_seconds));
  co_return reply;
}

std::variant<HttpReply, AdmittedRequest> ExecuteRoute::Screen(
    StatusOr<std::unique_ptr<ExecuteIngest>> body, const std::string& request_id,
    const std::string& tenant, const TenantLimits& limits) {
  auto fail = [&](const Status& status) {
    return EndingReply(EndingForStatus(status), status.message(), request_id);
  };
  if (!body.ok()) return fail(body.status());
  auto parsed = (*body)->Finish();
  if (!parsed.ok()) return fail(parsed.status());
  const auto& options = parsed->request.program.options;
  if (auto refusal = RefuseOptions(options, tenant, limits.gpu_count, request_id)) {
    return std::move(*refusal);
  }
  // A tensor of the wrong length is the client's 400; a memfd that cannot
  // be made is ours, a 500 (EndingForStatus).
  auto resolution = services_.blobs.Resolve(parsed->request.program, parsed->supplied);
  if (!resolution.ok()) return fail(resolution.status());
  if (!resolution->missing.empty()) {
    nlohmann::ordered_json miss = {{"status", "CACHE_MISS"},
                                   {"request_id", request_id},
                                   {"missing_blobs", resolution->missing}};
    return BodyReply(RequestEnding::kCacheMiss, "application/json", DumpJson(miss), request_id);
  }
  AdmittedRequest admitted{std::move(parsed->request), std::move(*resolution)};
  admitted.timeout_seconds =
      std::min(options.timeout_seconds.value_or(services_.config.default_timeout_seconds),
               services_.config.max_timeout_seconds);
  admitted.output_limit_bytes =
      std::min(options.output_limit_bytes.value_or(services_.config.output_limit_bytes),
               services_.config.max_output_limit_bytes);
  services_.events.SaveProgram(request_id, admitted.request.program_json);
  return admitted;
}

std::optional<HttpReply> ExecuteRoute::RefuseOptions(const protocol::ProgramOptions& options,
                                                     const std::string& tenant,
                                                     std::optional<int64_t> allowed_gpus,
                                                     const std::string& request_id) const {
  auto reject = [&](const std::string& message) {
    return EndingReply(RequestEnding::kRejected, message, request_id);
  };
  if (options.gpu_count && allowed_gpus && *options.gpu_count > *allowed_gpus) {
    return EndingReply(RequestEnding::kForbidden,
                       "options.gpu_count: tenant '" + tenant + "' may reserve at most " +
                           std::to_string(*allowed_gpus) + " GPUs (limit gpu_count), not " +
                           std::to_string(*options.gpu_count),
                       request_id);
  }
  if (options.gpu_count && services_.config.device == Device::kCpu) {
    return reject(
        "options.gpu_count: this is a CPU server; gpu_count exceeds its GPU capacity (0)");
  }
  if (options.gpu_count && *options.gpu_count > services_.pool.reservable_gpus()) {
    return reject("options.gpu_count: " + std::to_string(*options.gpu_count) +
                  " exceeds this GPU server's configured capacity (" +
                  std::to_string(services_.pool.reservable_gpus()) + " GPUs)");
  }
  if (options.gpu_arch && cluster_ == nullptr) {
    // A cluster's entry node sends it to that architecture's pool (cluster_entry.cc); a
    // server runs it only on its own.
    const std::string own =
        services_.pool.describe().value("target", nlohmann::json::object()).value("arch", "");
    if (services_.config.device == Device::kCpu) {
      return reject("options.gpu_arch: this is a CPU server; it has no " + *options.gpu_arch +
                    " GPU");
    }
    if (protocol::ArchNumberOf(own) != protocol::ArchNumberOf(*options.gpu_arch)) {
      return reject("options.gpu_arch: this server's GPUs are " + own + ", not " +
                    *options.gpu_arch);
    }
  }
  return std::nullopt;
}

HttpReply ExecuteRoute::Finish(HttpReply reply, const std::string& request_id,
                               const std::string& tenant, Clock::time_point received) {
  const double ms = MillisecondsSince(received);
  // Every reply built here carries its ending (request_ending.h).
  const auto level = reply.ending ? TraitsOf(*reply.ending).level : EventLevel::kError;
  nlohmann::json fields = {{"request_id", request_id},
                           {"http_status", reply.status},
                           {"finish_reason", reply.finish_reason()},
                           {"total_ms", ms},
                           {"response_bytes", reply.body_size()}};
  if (!reply.error_kind.empty()) fields["error_kind"] = reply.error_kind;
  if (!reply.error_message.empty()) fields["error_message"] = reply.error_message.substr(0, 2048);
  services_.events.Emit(level, "request_finished", fields);
  RequestRecord record{.request_id = request_id,
                       .tenant = tenant,
                       .http_status = reply.status,
                       .finish_reason = std::string(reply.finish_reason()),
                       .error_kind = reply.error_kind,
                       .error_message = reply.error_message,
                       .integrity = reply.integrity,
                       .total_ms = ms};
  CountFinished(services_, reply, ms, &record);
  reply.server_ms = ms;
  return reply;
}

net::awaitable<HttpReply> ExecuteRoute::RunHere(std::shared_ptr<AdmittedRequest> admitted,
                                                std::string request_id,
                                                std::shared_ptr<pool::CancelFlag> cancel) {
  auto job = JobFor(*admitted, request_id, std::move(cancel), services_.config.max_response_bytes);
  // The pool calls back from a seat thread; hop onto the event loop and wake us.
  auto result = std::make_shared<std::optional<pool::JobResult>>();
  auto wake =
      std::make_shared<net::steady_timer>(services_.io, net::steady_timer::time_point::max());
  job->done = [this, result, wake](pool::JobResult r) {
    net::post(services_.io, [result, wake, r = std::move(r)]() mutable {
      *result = std::move(r);
      wake->expires_at(
          net::steady_timer::time_point::min());  // cancels the wait, or makes it immediate
    });
  };
  if (!services_.pool.Submit(job)) {
    co_return EndingReply(RequestEnding::kSaturated, "server saturated", request_id);
  }
  while (!result->has_value())
    co_await wake->async_wait(net::as_tuple(net::use_awaitable));
  if ((*result)->ran) {
    services_.quotas.Charge(admitted->share.tenant, RecordRun(services_.metrics, **result));
    services_.requests.NoteRun(request_id, NoteOf(**result, admitted->request.program));
  }

  // Value checks, SHA-256 of results and multipart framing: on the parse pool.
  auto building = OnPool(services_.cpu_pool, [this, admitted, result, request_id] {
    OutcomeContext context{request_id, &admitted->request.program,
                           services_.config.max_response_bytes, admitted->output_limit_bytes};
    return BuildOutcomeReply(context, **result);
  });
  co_return co_await std::move(building);
}

std::shared_ptr<pool::Job> JobFor(const AdmittedRequest& admitted, const std::string& request_id,
                                  std::shared_ptr<pool::CancelFlag> cancel,
                                  uint64_t max_response_bytes) {
  auto job = std::make_shared<pool::Job>();
  job->run.request_id = request_id;
  job->run.cancel = std::move(cancel);
  job->run.program_json = admitted.request.program_json;
  for (const auto& [sha, blob] : admitted.resolution.blobs)
    job->run.blobs.push_back({sha, blob->fd()});
  job->gpu_count = static_cast<int>(admitted.request.program.options.gpu_count.value_or(0));
  job->run.output_limit_bytes = admitted.output_limit_bytes;
  job->run.max_response_bytes = max_response_bytes;
  job->run.timeout = std::chrono::nanoseconds(static_cast<int64_t>(admitted.timeout_seconds * 1e9));
  job->run.releases_at = LeaseReleases(admitted.request.program);
  job->share = admitted.share;
  job->key_id = admitted.key_id;
  return job;
}

std::vector<bool> LeaseReleases(const protocol::Program& program) {
  std::vector<bool> releases;
  std::unordered_map<std::string_view, bool> cpu_only;  // said by get_function, for its runs
  for (const auto& ins : program.instructions) {
    using protocol::Op;
    if (ins.op == Op::kGetFunction) cpu_only[ins.id] = ins.cpu_only;
    auto fn = cpu_only.find(ins.fn_ref);
    releases.push_back((ins.op == Op::kUpload && ins.upload_kind == protocol::UploadKind::kFile) ||
                       (ins.op == Op::kReturn && ins.return_kind != protocol::ReturnKind::kValue) ||
                       (ins.op == Op::kRun && fn != cpu_only.end() && fn->second));
  }
  return releases;
}

bool NeedsGpu(const protocol::Program& program) {
  if (program.options.gpu_count.value_or(0) > 0) return true;
  // cpu_only is said by get_function, for every run of that function.
  std::unordered_map<std::string_view, bool> cpu_only;
  for (const auto& ins : program.instructions) {
    if (ins.op == protocol::Op::kGetFunction) cpu_only[ins.id] = ins.cpu_only;
    if (ins.op != protocol::Op::kRun) continue;
    auto fn = cpu_only.find(ins.fn_ref);
    if (fn == cpu_only.end() || !fn->second) return true;
  }
  return false;
}

}  // namespace kc::server
