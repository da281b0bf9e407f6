#include "server/root/app.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <iostream>

#include <boost/beast/core.hpp>
#include <boost/beast/version.hpp>

#include "base/utc_time.h"
#include "cluster/pool_view.h"
#include "server/clustering/cluster_executor.h"
#include "server/clustering/cluster_usage.h"
#include "server/core/request_id.h"
#include "server/status/gpu_inventory.h"
#include "server/status/request_accounting.h"
#include "server/transport/connection.h"
#include "tls/server_context.h"

namespace kc::server {

namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);

// Variables the server decides for its workers, so values it inherited are dropped.
constexpr std::string_view kThreadCountVariables[] = {
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"};  // --worker-cpu-threads
constexpr std::string_view kServerOwnedVariables[] = {
    "CUDA_VISIBLE_DEVICES",         // we pin workers by UUID
    "CUDA_DEVICE_MAX_CONNECTIONS",  // --cuda-max-connections
    kThreadCountVariables[0], kThreadCountVariables[1], kThreadCountVariables[2]};

bool IsServerOwned(std::string_view entry) {
  for (std::string_view name : kServerOwnedVariables) {
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
        entry[name.size()] == '=')
      return true;
  }
  return false;
}

// What every worker's own code is told in its start message (ipc/worker_settings.h); a GPU's
// target is added per device (DeviceSpec::gpu_arch).
pool::WorkerSettings WorkerSettingsFrom(const ServerConfig& config) {
  pool::WorkerSettings settings;
  settings.device =
      config.device == Device::kGpu ? pool::WorkerDevice::kGpu : pool::WorkerDevice::kCpu;
  settings.cpu_execution = config.cpu_execution == CpuExecution::kReference
                               ? pool::WorkerCpuExecution::kReference
                               : pool::WorkerCpuExecution::kHost;
  // The address-space cap is for CPU workers only: CUDA reserves far more than it uses.
  settings.address_space_mbytes =
      config.device == Device::kCpu ? config.worker_memory_limit_mbytes : 0;
  settings.heap_bytes = uint64_t{WorkerHeapMbytes(config)} << 20;  // worker/warm_heap.h
  settings.max_libraries = config.max_libraries_per_worker;
  settings.preload = config.worker_preload;
  return settings;
}

StatusOr<pool::PoolOptions> PoolOptionsFrom(const ServerConfig& config) {
  pool::PoolOptions options;
  const int standby = config.standby_workers;
  if (config.device == Device::kCpu) {
    pool::DeviceSpec cpu;
    cpu.seats = config.num_workers;
    cpu.standby = standby >= 0 ? std::max(1, standby) : cpu.seats;
    options.devices.push_back(cpu);
  } else {
    for (int index : config.gpus) {
      KC_ASSIGN_OR_RETURN(GpuInfo gpu, QueryGpu(index));
      pool::DeviceSpec spec;
      spec.name = "gpu" + std::to_string(index);
      spec.gpu_index = index;
      spec.gpu_uuid = gpu.uuid;
      spec.seats = config.workers_per_gpu;
      spec.standby = standby >= 0 ? std::max(1, standby) : spec.seats;
      // Pinned by UUID (gpu_uuid) before CUDA starts; the worker sees its GPU as "cuda".
      spec.gpu_arch = gpu.arch;
      spec.extra_env = {"CUDA_DEVICE_MAX_CONNECTIONS=" +
                        std::to_string(config.cuda_max_connections)};
      if (std::getenv("TVM_FFI_CUDA_ARCH_LIST") == nullptr) {
        spec.extra_env.push_back("TVM_FFI_CUDA_ARCH_LIST=" + gpu.tvm_arch_list);
      }
      spec.device_nodes = DeviceNodesFor(gpu);
      spec.off_lease_bound_seconds = config.off_lease_gpu_seconds;
      options.devices.push_back(spec);
    }
  }
  options.housekeeping = config.housekeeping;
  options.use_zygote = config.zygote;
  options.max_requests_per_worker = config.max_requests_per_worker;
  options.max_queued_requests = config.max_queued_requests;
  options.worker_wait_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(config.worker_wait_timeout_seconds * 1000));
  options.launch.argv = {config.python, "-m", "kcoral._worker"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (!IsServerOwned(*e)) options.launch.env.emplace_back(*e);
  }
  for (std::string_view name : kThreadCountVariables) {
    options.launch.env.push_back(std::string(name) + "=" +
                                 std::to_string(WorkerCpuThreads(config)));
  }
  options.launch.env.push_back("PYTHONUNBUFFERED=1");
  options.launch.settings = WorkerSettingsFrom(config);
  options.sandbox.enabled = config.sandbox != SandboxMode::kNone;
  options.sandbox.private_network = config.sandbox_network == SandboxNetwork::kNone;
  options.sandbox.readonly_paths = config.sandbox_readonly_paths;
  options.sandbox.limits.memory_bytes = config.worker_memory_limit_mbytes << 20;
  options.sandbox.limits.max_tasks = config.worker_max_processes;
  return options;
}

store::BlobStoreOptions StoreOptionsFrom(const ServerConfig& config) {
  store::BlobStoreOptions options;
  options.memory_capacity_bytes = config.cache_capacity_bytes;
  options.disk_dir = config.disk_cache_dir;
  options.disk_capacity_bytes = config.disk_cache_capacity_mbytes << 20;
  return options;
}

}  // namespace

// Threads for the calls that wait on the cluster (ClusterCall, core/services.h): enough that calls
// waiting out one stream's leader election (5-8 s) or a dead node's connect timeout leave threads
// for the rest.
constexpr int kClusterCallThreads = 16;

App::App(ServerConfig config)
    : config_(std::move(config)),
      events_(config_.log_dir, config_.log_console, config_.log_programs),
      blobs_(StoreOptionsFrom(config_)),
      // Only sandboxed workers need it: unsandboxed ones share the server's HOME.
      build_cache_(config_.sandbox == SandboxMode::kNone ? "" : config_.build_cache_dir,
                   config_.build_cache_capacity_mbytes << 20),
      cpu_pool_(config_.parse_threads) {
  state_.instance_id = NewUuid();
  state_.started_at = FormatUtcNow("%Y-%m-%dT%H:%M:%S", 6);
  state_.tls = config_.tls.has_value();
}

App::~App() {
  status_.reset();
  if (pool_) pool_->Join();
  if (cluster_calls_) cluster_calls_->join();  // first: what it finishes resumes on the parse pool
  cpu_pool_.join();
}

net::awaitable<void> App::Listen(tcp::acceptor acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (ec) {
      if (ec == net::error::operation_aborted) co_return;
      continue;
    }
    net::co_spawn(io_, ServeConnection(*routes_, std::move(socket), tls_ ? &*tls_ : nullptr),
                  net::detached);
  }
}

nlohmann::json App::DescribePool() const {
  const pool::PoolLoad load = pool_->Load();
  const nlohmann::json& describe = pool_->describe();
  const nlohmann::json target = describe.value("target", nlohmann::json::object());
  const std::string name = config_.device == Device::kCpu
                               ? std::string("cpu")
                               : "gpu/" + target.value("arch", std::string("unknown"));
  return {{"pool", name},
          {"device", FlagText(config_.device)},
          {"target", target},
          {"versions", describe.value("versions", nlohmann::json::object())},
          {"request_capacity", load.request_capacity},
          {"requests_in_progress", load.requests_in_progress},
          {"requests_waiting", load.requests_waiting}};
}

nlohmann::json App::DescribeNode(const std::string& url) const {
  nlohmann::json pools = nlohmann::json::array();
  if (!config_.cluster.entry_only) pools.push_back(DescribePool());
  return {{"url", url},
          {"instance_id", state_.instance_id},
          {"started_at", state_.started_at},
          {"shutting_down", state_.shutting_down.load()},
          {"entry_only", config_.cluster.entry_only},
          {"pools", std::move(pools)}};
}

Status App::JoinCluster(int port) {
  if (config_.cluster.servers.empty()) return Status::Ok();
  std::string host = config_.host;
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    host = name;
  }
  const std::string url = config_.node_url.empty()
                              ? std::string(Scheme()) + "://" + host + ":" + std::to_string(port)
                              : config_.node_url;
  node_url_ = url;
  const std::string node_id = host + "-" + std::to_string(port);
  cluster::ClusterOptions options = config_.cluster;
  options.usage_ttl = 2 * std::chrono::seconds(config_.quota_window_seconds);
  auto warn = [this](const nlohmann::json& report) {
    events_.Emit(EventLevel::kWarning, "cluster_broker_sync",
                 {{"state", report.at("state")}, {"message", report.at("message")}});
  };
  auto node = cluster::ClusterNode::Join(
      options, node_id, [this, url] { return DescribeNode(url); }, warn);
  if (!node.ok()) return node.status().WithContext("--cluster");
  cluster_ = std::move(*node);
  cluster_calls_.emplace(kClusterCallThreads);
  cluster_usage_ = std::make_unique<ClusterUsage>(*cluster_, events_);
  quotas_.Share(cluster_usage_.get());
  services_->cluster = cluster_.get();
  services_->peers = peers_.get();
  services_->cluster_calls = &*cluster_calls_;
  auto entry = ClusterEntry::Start(*services_, *cluster_);
  if (!entry.ok()) return entry.status().WithContext("--cluster");
  cluster_entry_ = std::move(*entry);
  if (!config_.cluster.entry_only) {
    const std::string pool = cluster::PoolIdOf(DescribePool());
    auto executor =
        ClusterExecutor::Start(*services_, *cluster_, pool, pool_->Load().request_capacity);
    if (!executor.ok()) return executor.status().WithContext("--cluster");
    executor_ = std::move(*executor);
  }
  events_.Emit(EventLevel::kInfo, "cluster_joined",
               {{"servers", config_.cluster.servers},
                {"node_id", node_id},
                {"url", url},
                {"pools", DescribeNode(url)["pools"]}});
  return Status::Ok();
}

void App::BeginShutdown() {
  if (state_.shutting_down.exchange(true)) return;
  events_.Emit(EventLevel::kInfo, "shutdown_started", {{"remaining", state_.in_flight.load()}});
  if (executor_) executor_->Stop();  // pulls nothing more; what it runs finishes
  if (status_) status_->CloseStreams();
  if (pool_) pool_->BeginShutdown();
}

int App::FailStart(const StartFailure& failure) {
  events_.Emit(EventLevel::kError, "server_start_failed", {{"error", failure.error}});
  if (failure.console) std::cerr << "kcoral server: " << failure.error << "\n";
  return failure.exit_code;
}

// Fail closed, before any worker starts: never plain HTTP in place of HTTPS, never a peer left
// unchecked for a CA that cannot be read (issue 26 item 7), never an open server for a keys
// file that does not parse.
std::optional<App::StartFailure> App::LoadSecurity() {
  if (config_.sandbox == SandboxMode::kNone) {
    events_.Emit(EventLevel::kWarning, "sandbox_disabled",
                 {{"reason", "--sandbox none: workers run with the server's rights"}});
  }
  if (config_.tls) {
    auto context = tls::MakeServerContext(*config_.tls);
    if (!context.ok()) return StartFailure{2, context.status().message()};
    tls_.emplace(std::move(*context));
  }
  if (!config_.cluster.servers.empty()) {
    auto peers = cluster::PeerClient::Make(config_.cluster);
    if (!peers.ok()) return StartFailure{2, peers.status().message()};
    peers_ = std::move(*peers);
    if (config_.cluster.peer_check == cluster::PeerCertificateCheck::kNone) {
      events_.Emit(EventLevel::kWarning, "cluster_peer_tls_unverified",
                   {{"warning",
                     "--cluster-peer-no-verify: the certificates of https:// peer nodes are not "
                     "checked; anyone on the path between nodes can pose as one"}});
    }
  }
  if (!config_.auth_keys.empty()) {
    auto access = AccessControl::Load(config_.auth_keys);
    if (!access.ok()) return StartFailure{2, access.status().message()};
    access_ = std::move(*access);
  } else if (config_.host != "127.0.0.1" && config_.host != "::1" && config_.host != "localhost") {
    const std::string warning = "listening on " + config_.host +
                                " without --auth-keys: anyone who reaches the port may run "
                                "code on this machine (docs/deploy.md)";
    events_.Emit(EventLevel::kWarning, "auth_none", {{"warning", warning}});
    std::cerr << "kcoral server: warning: " << warning << "\n";
  }
  return std::nullopt;
}

std::optional<App::StartFailure> App::StartWorkers() {
  auto options = PoolOptionsFrom(config_);
  if (!options.ok()) return StartFailure{1, options.status().message(), false};
  if (build_cache_.enabled()) options->hooks = &build_cache_hooks_;
  std::vector<GpuTelemetry::Gpu> telemetry;
  for (const pool::DeviceSpec& device : options->devices) {
    if (device.gpu_index >= 0) telemetry.push_back({device.gpu_index, device.gpu_uuid});
  }
  gpu_telemetry_ = std::make_unique<GpuTelemetry>(std::move(telemetry));
  pool_ = std::make_unique<pool::WorkerPool>(std::move(*options), metrics_);
  services_.emplace(Services{.config = config_,
                             .state = state_,
                             .events = events_,
                             .metrics = metrics_,
                             .blobs = blobs_,
                             .pool = *pool_,
                             .quotas = quotas_,
                             .access = *access_,
                             .requests = requests_,
                             .history = history_,
                             .io = io_,
                             .cpu_pool = cpu_pool_,
                             .node_url = node_url_});
  if (Status started = pool_->Start(); !started.ok()) {
    std::string error = started.message();
    if (config_.sandbox != SandboxMode::kNone) {
      // Fail closed (issue 7): never fall back to unsandboxed workers silently.
      error +=
          " -- the worker sandbox (on by default) could not be set up, so the server "
          "refuses to start; --sandbox none runs workers without isolation";
    }
    return StartFailure{1, error};  // whole on the console: the console event is cut short
  }
  return std::nullopt;
}

std::variant<tcp::acceptor, App::StartFailure> App::OpenListener() {
  boost::system::error_code ec;
  tcp::endpoint endpoint(net::ip::make_address(config_.host, ec),
                         static_cast<unsigned short>(config_.port));
  if (ec) return StartFailure{2, "bad --host " + config_.host, false};
  tcp::acceptor acceptor(io_);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return StartFailure{2,
                        "cannot listen on " + config_.host + ":" + std::to_string(config_.port) +
                            ": " + ec.message(),
                        false};
  }
  return acceptor;
}

void App::BuildRoutes() {
  status_ = std::make_unique<StatusRoutes>(*services_, gpu_telemetry_.get());
  execute_.emplace(*services_, cluster_entry_.get());
  blob_routes_.emplace(*services_);
  peer_routes_.emplace(*services_);
  routes_.emplace(Routes{*services_, *execute_, *blob_routes_, *peer_routes_, *status_});
}

void App::AnnounceStarted(int port) {
  if (config_.device == Device::kGpu) {
    SampleGpuTime(history_, pool_->Load(), UnixMillisecondsNow());  // zero
  }
  events_.Emit(EventLevel::kInfo, "pool_ready",
               {{"mode", FlagText(config_.device)},
                {"workers", pool_->Load().request_capacity},
                {"target", pool_->describe().value("target", nlohmann::json::object())},
                {"versions", pool_->describe().value("versions", nlohmann::json::object())},
                {"sandbox", pool_->DescribeSandbox()}});
  events_.Emit(EventLevel::kInfo, "server_started",
               {{"url", std::string(Scheme()) + "://" + config_.host + ":" + std::to_string(port)},
                {"tls", tls_.has_value()},
                {"run_dir", events_.run_dir().string()},
                {"instance_id", state_.instance_id}});
}

int App::Run() {
  ::signal(SIGPIPE, SIG_IGN);
  if (std::optional<StartFailure> failed = LoadSecurity()) return FailStart(*failed);
  if (std::optional<StartFailure> failed = StartWorkers()) return FailStart(*failed);
  auto listener = OpenListener();
  if (auto* failed = std::get_if<StartFailure>(&listener)) return FailStart(*failed);
  tcp::acceptor acceptor = std::move(std::get<tcp::acceptor>(listener));
  const int port = acceptor.local_endpoint().port();
  if (Status joined = JoinCluster(port); !joined.ok()) {
    return FailStart({1, joined.message()});
  }
  BuildRoutes();
  AnnounceStarted(port);
  return Serve(std::move(acceptor));
}

void App::ReloadKeys() {
  if (!access_->enabled()) return;
  if (Status loaded = access_->Reload(); !loaded.ok()) {
    events_.Emit(EventLevel::kError, "auth_keys_reload_failed", {{"error", loaded.message()}});
    return;
  }
  // Running requests of a revoked key finish; its waiting ones are answered 401.
  const size_t revoked = pool_->Revoke([this](const pool::Job& job) {
    return !job.key_id.empty() && !access_->StillValid(job.key_id);
  });
  events_.Emit(EventLevel::kInfo, "auth_keys_reloaded",
               {{"keys", access_->key_count()}, {"revoked_waiting_requests", revoked}});
  status_->CloseStreams();  // its viewers come back with their keys, checked anew
}

int App::Serve(tcp::acceptor acceptor) {
  net::signal_set signals(io_, SIGINT, SIGTERM);
  std::function<void(const boost::system::error_code&, int)> on_signal;
  on_signal = [&](const boost::system::error_code& sig_ec, int) {
    if (sig_ec) return;
    acceptor.close();
    BeginShutdown();
    signals.async_wait(on_signal);  // repeated signals do not force-quit
  };
  signals.async_wait(on_signal);
  // SIGHUP reloads the keys; a file that does not parse keeps the old ones, and says why.
  net::signal_set reload(io_, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_reload;
  on_reload = [&](const boost::system::error_code& sig_ec, int) {
    if (sig_ec) return;
    ReloadKeys();
    reload.async_wait(on_reload);
  };
  reload.async_wait(on_reload);
  net::co_spawn(io_, Listen(std::move(acceptor)), net::detached);

  // Serve until shutdown has begun and nothing is in flight.
  net::steady_timer poll(io_);
  std::function<void(const boost::system::error_code&)> check;
  check = [&](const boost::system::error_code&) {
    if (state_.shutting_down && state_.in_flight == 0) {
      signals.cancel();
      reload.cancel();
      io_.stop();
      return;
    }
    poll.expires_after(std::chrono::milliseconds(100));
    poll.async_wait(check);
  };
  poll.expires_after(std::chrono::milliseconds(100));
  poll.async_wait(check);
  io_.run();

  routes_.reset();    // names the route objects below: gone before them
  status_.reset();    // its streams' builds read the pool and the cluster
  executor_.reset();  // waits for the cluster's requests it runs
  pool_->Join();
  execute_.reset();
  cluster_entry_.reset();  // stops hearing the cluster
  services_->cluster = nullptr;
  cluster_.reset();  // leaves the cluster: its record goes at once
  events_.Emit(EventLevel::kInfo, "shutdown_complete", {});
  events_.Emit(EventLevel::kInfo, "server_stopped", {});
  return 0;
}

}  // namespace kc::server
