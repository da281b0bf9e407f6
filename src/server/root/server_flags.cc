#include "server/root/server_flags.h"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <ostream>
#include <string_view>

#include <CLI/CLI.hpp>

#include "server/core/server_modes.h"

namespace kc::server {
namespace {

// Flags read as text or seconds and turned into config's types after CLI11 has parsed them.
struct RawFlags {
  std::string device, housekeeping, sandbox, sandbox_network, cpu_execution;
  tls::TlsIdentity tls;
  CLI::Option* tls_cert = nullptr;
  CLI::Option* cluster = nullptr;
  CLI::Option* auth_keys = nullptr;
  CLI::Option* idle_tenant = nullptr;
  CLI::Option* run_lease = nullptr;
  int heartbeat_seconds = 0;
  int ack_wait_seconds = 0;
  int run_lease_seconds = 0;
  int idle_tenant_seconds = 0;
  std::string secret_file;
  bool peer_no_verify = false;
};

constexpr const char* kGpuOnlyFlags[] = {"--housekeeping", "--cuda-max-connections",
                                         "--off-lease-gpu-seconds"};

std::string DefaultCacheDir(const Getenv& getenv, const std::string& name) {
  const char* xdg = getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/kcoral/" + name;
  const char* home = getenv("HOME");
  return std::string(home != nullptr ? home : "/tmp") + "/.cache/kcoral/" + name;
}

// KCORAL_PRELOAD's module names: comma-separated, blanks around each ignored.
std::vector<std::string> ModuleList(std::string_view text) {
  std::vector<std::string> names;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view name = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t first = name.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;
    names.emplace_back(name.substr(first, name.find_last_not_of(" \t") - first + 1));
  }
  return names;
}

// A non-negative integer, blanks around it allowed; nullopt otherwise.
std::optional<uint64_t> Count(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return std::nullopt;
  text = text.substr(first, text.find_last_not_of(" \t") - first + 1);
  uint64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The defaults that come from the environment rather than from flags.
Status FromEnvironment(const Getenv& getenv, ServerConfig& config) {
  config.disk_cache_dir = DefaultCacheDir(getenv, "files");
  config.build_cache_dir = DefaultCacheDir(getenv, "builds");
  if (const char* python = getenv("KCORAL_PYTHON")) config.python = python;
  if (const char* preload = getenv("KCORAL_PRELOAD")) config.worker_preload = ModuleList(preload);
  if (const char* cap = getenv("KCORAL_MAX_LIBRARIES_PER_WORKER")) {
    std::optional<uint64_t> count = Count(cap);
    if (!count) {
      return InvalidArgumentError(
          "KCORAL_MAX_LIBRARIES_PER_WORKER must be a non-negative integer, not '" +
          std::string(cap) + "'");
    }
    config.max_libraries_per_worker = *count;
  }
  return Status::Ok();
}

// Where the server listens, over what, and on which device.
void AddListenFlags(CLI::App& cli, ServerConfig& config, RawFlags& raw) {
  cli.add_option("--host", config.host, "Address to listen on (0.0.0.0: every interface)")
      ->envname("KCORAL_SERVER_HOST");
  cli.add_option("--port", config.port, "TCP port")
      ->envname("KCORAL_SERVER_PORT")
      ->check(CLI::Range(1, 65535));
  raw.tls_cert =
      cli.add_option("--tls-cert", raw.tls.cert_file,
                     "Serve HTTPS (TLS 1.2 or later) with this PEM certificate, then any\n"
                     "intermediates; needs --tls-key. Without both, plain HTTP")
          ->envname("KCORAL_TLS_CERT");
  CLI::Option* tls_key =
      cli.add_option("--tls-key", raw.tls.key_file,
                     "The PEM private key of --tls-cert (not encrypted); needs --tls-cert")
          ->envname("KCORAL_TLS_KEY");
  raw.tls_cert->needs(tls_key);  // one alone is refused, naming the other
  tls_key->needs(raw.tls_cert);
  cli.add_option("--device", raw.device, "cpu: compile server, no GPU; gpu: GPU execution server")
      ->envname("KCORAL_SERVER_DEVICE")
      ->check(CLI::IsMember(FlagTexts(kDeviceFlag)));
  cli.add_option("--gpus", config.gpus, "Physical GPU ids (GPU mode), comma separated")
      ->envname("KCORAL_SERVER_GPUS")
      ->delimiter(',');
}

// The worker seats and what each worker process gets.
void AddWorkerFlags(CLI::App& cli, ServerConfig& config, RawFlags& raw) {
  cli.add_option("--num-workers", config.num_workers, "Worker seats on a CPU server")
      ->check(CLI::PositiveNumber);
  cli.add_option("--workers-per-gpu", config.workers_per_gpu, "Worker seats per GPU")
      ->check(CLI::PositiveNumber);
  cli.add_option("--standby-workers", config.standby_workers,
                 "Prepared worker processes kept ready (-1: one per seat)");
  cli.add_option(
         "--cuda-max-connections", config.cuda_max_connections,
         "GPU workers: hardware work queues per CUDA context (CUDA_DEVICE_MAX_CONNECTIONS).\n"
         "Each costs context creation and teardown time under a driver lock that all\n"
         "processes share: on the H200, 1 lets a GPU start ~11 fresh workers/s, the\n"
         "driver's default of 8 ~4.6/s. Kernels of one stream are timed alike either way;\n"
         "with fewer queues, kernels on different streams may wait for each other")
      ->envname("KCORAL_CUDA_MAX_CONNECTIONS")
      ->check(CLI::Range(1, 32));
  cli.add_option("--off-lease-gpu-seconds", config.off_lease_gpu_seconds,
                 "GPU workers: seconds of GPU use a request's processes may have while the\n"
                 "request does not hold the GPU lease (a thread or child left running across\n"
                 "a cpu_only run or a file transfer), seen in NVML's per-process samples and\n"
                 "charged to the tenant; past it the worker is killed and the request FAILS\n"
                 "with gpu_access. 0 turns the watch off; the server refuses to start where\n"
                 "NVML cannot sample the GPU's processes")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--worker-cpu-threads", config.worker_cpu_threads,
                 "Host threads per worker for torch, OpenMP and BLAS (OMP_NUM_THREADS,\n"
                 "MKL_NUM_THREADS, OPENBLAS_NUM_THREADS), and for copying a large tensor\n"
                 "upload to the GPU. 0: min(4, cores). Every worker would\n"
                 "otherwise start one per core: on the H200 machine (16 cores) the seed's check,\n"
                 "torch.testing.assert_close of 1M floats, took 112 ms with 16 and 6 ms with 4")
      ->envname("KCORAL_WORKER_CPU_THREADS")
      ->check(CLI::Range(0, 1024));
  cli.add_option("--worker-heap-mbytes", config.worker_heap_mbytes,
                 "Host memory each worker faults in and keeps free for its program before it is\n"
                 "ready, so that a request's first allocations find pages already there (a fresh\n"
                 "page cost ~3 us on the H200; with it, the seed's check under the GPU lease went\n"
                 "from 21.8 to 12.1 ms in a saturating stream). Counts against\n"
                 "--worker-memory-limit-mbytes. -1: 64 on GPU servers, 0 on CPU")
      ->envname("KCORAL_WORKER_HEAP_MBYTES")
      ->check(CLI::Range(-1, 65536));
  cli.add_option(
         "--housekeeping", raw.housekeeping,
         "GPU servers: when stand-by workers may set up their CUDA context and run their\n"
         "first kernels, and retired ones destroy their context, against the timing spans\n"
         "of benchmarks on that GPU (docs/gpu-scheduling.md).\n"
         "outside-spans (default): neither while a span times (a span waits for them,\n"
         "  they for it): timed medians and tails as on a quiet GPU\n"
         "contexts-beside-spans: contexts created and destroyed at any time, first\n"
         "  kernels never while a span times; busier GPU, tails of tiny kernels move\n"
         "beside-spans: both at any time; busiest GPU, medians of tiny kernels move.\n"
         "Every result says how many ran beside its spans (timing_spans.housekeeping_beside)")
      ->envname("KCORAL_HOUSEKEEPING")
      ->check(CLI::IsMember(FlagTexts(kHousekeepingFlag)));
  cli.add_option("--max-requests-per-worker", config.max_requests_per_worker,
                 "Requests a worker process serves before it is replaced (0: unlimited)")
      ->check(CLI::NonNegativeNumber);
  cli.add_option(
      "--worker-termination-grace-seconds", config.worker_termination_grace_seconds,
      "Accepted for compatibility; workers are killed at once (their state is discarded)");
}

// Worker isolation.
void AddSandboxFlags(CLI::App& cli, ServerConfig& config, RawFlags& raw) {
  cli.add_option("--sandbox", raw.sandbox,
                 "Worker isolation. namespaces: every worker in its own PID, mount, network,\n"
                 "IPC and UTS namespaces, as uid 65534 with no capabilities, a seccomp filter\n"
                 "and a cgroup; it sees a read-only system, its interpreter and toolkits, and\n"
                 "its own /work and /tmp. Needs root; the server refuses to start where a part\n"
                 "cannot be set up. bubblewrap: the same (the reference's name). none: workers\n"
                 "run with the server's rights")
      ->check(CLI::IsMember(FlagTexts(kSandboxFlag)));
  cli.add_option("--sandbox-network", raw.sandbox_network,
                 "none: each worker has only its own loopback; host: the host's network")
      ->check(CLI::IsMember(FlagTexts(kSandboxNetworkFlag)));
  cli.add_option("--sandbox-readonly-path", config.sandbox_readonly_paths,
                 "A host path workers may read (repeatable; not with --sandbox none)");
  cli.add_option("--worker-max-processes", config.worker_max_processes,
                 "Sandbox: processes and threads one worker and everything it starts may have\n"
                 "at once (cgroup pids.max); a fork bomb fails to fork past it")
      ->check(CLI::PositiveNumber);
}

// Time, size and queue limits of requests.
void AddLimitFlags(CLI::App& cli, ServerConfig& config, RawFlags& raw) {
  cli.add_option("--worker-wait-timeout-seconds", config.worker_wait_timeout_seconds,
                 "How long a request may wait for a worker before 503 busy")
      ->check(CLI::PositiveNumber);
  cli.add_option("--default-timeout-seconds", config.default_timeout_seconds,
                 "Execution budget when a request sets none")
      ->check(CLI::PositiveNumber);
  cli.add_option("--max-timeout-seconds", config.max_timeout_seconds,
                 "Cap for a request's timeout_seconds (clamped, not rejected)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--max-request-bytes", config.max_request_bytes, "Request body cap (413 beyond)");
  cli.add_option("--max-response-bytes", config.max_response_bytes,
                 "Response cap (500 response_too_large beyond)");
  cli.add_option("--output-limit-bytes", config.output_limit_bytes,
                 "Default stdout/stderr capture per stream")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--max-output-limit-bytes", config.max_output_limit_bytes,
                 "Cap for a request's output_limit_bytes")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--max-queued-requests", config.max_queued_requests,
                 "Requests that may wait for a worker; beyond, 503 busy")
      ->check(CLI::PositiveNumber);
}

// Caches, logs, CPU execution, the interpreter.
void AddCacheAndLogFlags(CLI::App& cli, ServerConfig& config, RawFlags& raw) {
  cli.add_option("--cache-capacity-bytes", config.cache_capacity_bytes,
                 "In-memory blob cache (tensor, bytes, library uploads)");
  cli.add_option("--disk-cache-dir", config.disk_cache_dir,
                 "Disk blob cache for file uploads ('' disables)");
  cli.add_option("--disk-cache-capacity-mbytes", config.disk_cache_capacity_mbytes,
                 "Disk blob cache budget in MiB (0 disables)");
  cli.add_option("--build-cache-dir", config.build_cache_dir,
                 "Sandbox: compile caches (tvm_ffi builds) kept per identical program, so the\n"
                 "same compile request is fast again; a program reads only what a byte-identical\n"
                 "program wrote ('' disables)");
  cli.add_option("--build-cache-capacity-mbytes", config.build_cache_capacity_mbytes,
                 "Build cache budget in MiB; past it, new entries are not saved");
  cli.add_option("--log-dir", config.log_dir, "Event log directory ('' disables)")
      ->envname("KCORAL_LOG_DIR");
  cli.add_flag("!--no-log-console", config.log_console, "Do not mirror events to stderr");
  cli.add_flag("!--no-log-programs", config.log_programs, "Do not save accepted programs");
  cli.add_option("--cpu-execution", raw.cpu_execution,
                 "CPU servers: 'host' runs tensor and library uploads on the host; 'reference'\n"
                 "answers them 'unavailable' as the reference server does")
      ->check(CLI::IsMember(FlagTexts(kCpuExecutionFlag)));
  cli.add_option("--python", config.python, "Python interpreter that runs workers")
      ->envname("KCORAL_PYTHON");
  cli.add_flag("!--no-zygote", config.zygote,
               "Start every worker as a new interpreter instead of forking a prepared one");
  cli.add_option("--worker-memory-limit-mbytes", config.worker_memory_limit_mbytes,
                 "Host memory, in MiB, one worker and everything it starts may use (a cgroup\n"
                 "limit with the sandbox; past it the worker is killed and the request FAILS).\n"
                 "CPU servers also cap each process's address space, so a runaway allocation\n"
                 "is a MemoryError (the interpreter itself takes ~200). 0: no limit");
  cli.add_option("--parse-threads", config.parse_threads, "Threads for parsing, hashing, responses")
      ->check(CLI::PositiveNumber);
}

// Joining a cluster over NATS JetStream (docs/cluster.md).
void AddClusterFlags(CLI::App& cli, ServerConfig& config, RawFlags& raw) {
  raw.heartbeat_seconds = static_cast<int>(config.cluster.heartbeat.count());
  raw.cluster =
      cli.add_option(
             "--cluster", config.cluster.servers,
             "Join a KCoral cluster through these NATS JetStream servers, comma separated\n"
             "(nats://h1:4222,nats://h2:4222; docs/cluster.md). Without it the server is a\n"
             "single node, as always")
          ->envname("KCORAL_CLUSTER")
          ->delimiter(',');
  cli.add_option("--cluster-user", config.cluster.user,
                 "NATS user name; its password comes from KCORAL_CLUSTER_PASSWORD, never argv")
      ->needs(raw.cluster);
  cli.add_option("--cluster-creds", config.cluster.creds,
                 "A NATS credentials file (user JWT and NKey seed) for the cluster's servers")
      ->needs(raw.cluster)
      ->check(CLI::ExistingFile);
  cli.add_option("--cluster-tls-ca", config.cluster.tls_ca,
                 "Connect to NATS over TLS, checking the servers against this CA file")
      ->needs(raw.cluster)
      ->check(CLI::ExistingFile);
  cli.add_option("--cluster-replicas", config.cluster.replicas,
                 "Replicas of the cluster's JetStream buckets (at most the JetStream servers)")
      ->needs(raw.cluster)
      ->check(CLI::Range(1, 5));
  auto* monitors =
      cli.add_option(
             "--cluster-nats-monitor", config.cluster.nats_monitors,
             "The NATS servers' monitoring endpoints, comma separated\n"
             "(http://h1:8222,...: nats-server -m 8222, or http_port in its config).\n"
             "Each is asked, at start and every minute, whether it syncs a write to disk\n"
             "before it acknowledges it (jetstream { sync_interval: always }); one that\n"
             "does not, or cannot be asked, is a warning in /health (cluster.broker_sync),\n"
             "the log and the dashboard. Without it the warning says it cannot tell")
          ->needs(raw.cluster)
          ->delimiter(',');
  cli.add_flag("--cluster-allow-lazy-fsync", config.cluster.allow_lazy_fsync,
               "Accept NATS servers that acknowledge before they sync (JetStream's default):\n"
               "no check, no warning. A power loss of the brokers then loses acknowledged\n"
               "requests and stored outcomes, and a retry may run a program again")
      ->needs(raw.cluster)
      ->excludes(monitors);
  cli.add_flag("--cluster-entry-only", config.cluster.entry_only,
               "A front door: this node takes requests and queues them for the cluster's\n"
               "pools, but runs none (it announces no pool and pulls nothing)")
      ->needs(raw.cluster);
  cli.add_option("--cluster-heartbeat-seconds", raw.heartbeat_seconds,
                 "How often this node tells the cluster it is alive; it is forgotten after\n"
                 "three missed beats")
      ->needs(raw.cluster)
      ->check(CLI::Range(1, 300));
}

// API keys and quotas (docs/deploy.md).
void AddTenancyFlags(CLI::App& cli, ServerConfig& config, RawFlags& raw) {
  raw.auth_keys =
      cli.add_option("--auth-keys", config.auth_keys,
                     "API keys: one line per key, 'TENANT SHA256-OF-KEY tenant|operator' (make\n"
                     "them with `kcoral keys new TENANT`), and per tenant 'limits TENANT\n"
                     "in_flight=8 queued=100 gpu_seconds=600 cpu_seconds=1800\n"
                     "max_request_bytes=1G gpu_count=1 weight=3' (each optional; 'limits *'\n"
                     "for the rest). Then /execute, /blobs and /usage need a key, /metrics an\n"
                     "operator's, /health none; SIGHUP reloads the file. Without it anyone who\n"
                     "reaches the port may run code (docs/deploy.md)")
          ->check(CLI::ExistingFile);
  cli.add_option("--quota-window-seconds", config.quota_window_seconds,
                 "The window of the limits' gpu_seconds and cpu_seconds, counted from the\n"
                 "Unix epoch (3600: each hour on the hour), so a cluster's nodes share it")
      ->needs(raw.auth_keys)
      ->check(CLI::Range(1, 31 * 24 * 3600));
}

// How the cluster's nodes speak to each other.
void AddClusterPeerFlags(CLI::App& cli, ServerConfig& config, RawFlags& raw) {
  cli.add_option("--cluster-secret-file", raw.secret_file,
                 "The cluster's shared secret, for its nodes' requests to each other (blob\n"
                 "fetches, results): the same on every node. Else KCORAL_CLUSTER_SECRET;\n"
                 "one of them is required, never argv")
      ->needs(raw.cluster)
      ->check(CLI::ExistingFile);
  raw.ack_wait_seconds = static_cast<int>(config.cluster.ack_wait.count());
  cli.add_option("--cluster-ack-wait-seconds", raw.ack_wait_seconds,
                 "A running request's node says \"in progress\" three times this often; a node\n"
                 "silent this long is taken for dead and the request runs elsewhere. Fixed\n"
                 "by the first node of a pool")
      ->needs(raw.cluster)
      ->check(CLI::Range(3, 3600));
  raw.run_lease_seconds = static_cast<int>(config.cluster.run_lease.count());
  raw.run_lease =
      cli.add_option(
             "--cluster-run-lease-seconds", raw.run_lease_seconds,
             "A node that falls silent (its broker paused, its network cut) is still taken\n"
             "to hold the runs its last heartbeat listed this long: their requests, if\n"
             "handed to another node, wait for its outcome rather than run twice. A node\n"
             "whose heartbeats fail for half of it cancels its runs. At least three\n"
             "--cluster-heartbeat-seconds")
          ->needs(raw.cluster)
          ->check(CLI::Range(1, 3600));
  raw.idle_tenant_seconds = static_cast<int>(config.cluster.idle_tenant.count());
  raw.idle_tenant =
      cli.add_option("--cluster-idle-tenant-seconds", raw.idle_tenant_seconds,
                     "A tenant's work queue that no node used this long gives its JetStream\n"
                     "consumer back (each costs the NATS servers CPU while it lives); its next\n"
                     "request makes it again. At least twice --cluster-ack-wait-seconds")
          ->needs(raw.cluster)
          ->check(CLI::Range(6, 30 * 24 * 3600));
  CLI::Option* peer_ca =
      cli.add_option("--cluster-peer-ca", config.cluster.peer_ca,
                     "The PEM CA bundle that other nodes' certificates must chain to: a node\n"
                     "whose URL is https:// is spoken to over TLS, its certificate checked\n"
                     "against it and the URL's host name. Required with --tls-cert in a cluster")
          ->envname("KCORAL_CLUSTER_PEER_CA")
          ->needs(raw.cluster)
          ->check(CLI::ExistingFile);
  cli.add_flag("--cluster-peer-no-verify", raw.peer_no_verify,
               "Speak TLS to https:// nodes without checking their certificates (anyone on the\n"
               "path can pose as a node; for trials only), in place of --cluster-peer-ca")
      ->needs(raw.cluster)
      ->excludes(peer_ca);
  cli.add_option("--node-url", config.node_url,
                 "How other nodes and clients reach this node (default http://HOST:PORT, https\n"
                 "with --tls-cert, with this machine's name for a wildcard --host)")
      ->needs(raw.cluster);
}

// The cluster's timings, secret and password, after parsing.
Status ApplyClusterFlags(const RawFlags& raw, const Getenv& getenv, ServerConfig& config) {
  if (raw.peer_no_verify) config.cluster.peer_check = cluster::PeerCertificateCheck::kNone;
  // Fail closed (issue 26 item 7): an HTTPS node's peers are HTTPS too, and must be checked.
  if (config.tls && !config.cluster.servers.empty() && config.cluster.peer_ca.empty() &&
      !raw.peer_no_verify) {
    return InvalidArgumentError(
        "--tls-cert in a cluster needs --cluster-peer-ca FILE, the CA that signed the other "
        "nodes' certificates, to check them when blobs and results travel between nodes "
        "(--cluster-peer-no-verify skips the check, for trials only)");
  }
  config.cluster.heartbeat = std::chrono::seconds(raw.heartbeat_seconds);
  config.cluster.ack_wait = std::chrono::seconds(raw.ack_wait_seconds);
  config.cluster.idle_tenant = std::chrono::seconds(raw.idle_tenant_seconds);
  config.cluster.run_lease = std::chrono::seconds(raw.run_lease_seconds);
  // Shorter, and a node that missed a beat or two would lose its runs to other nodes.
  if (config.cluster.run_lease < 3 * config.cluster.heartbeat) {
    if (*raw.run_lease) {
      return InvalidArgumentError("--cluster-run-lease-seconds " +
                                  std::to_string(raw.run_lease_seconds) +
                                  " must be at least three --cluster-heartbeat-seconds (" +
                                  std::to_string(3 * raw.heartbeat_seconds) + ")");
    }
    config.cluster.run_lease = 3 * config.cluster.heartbeat;  // a slow heartbeat's default
  }
  // A dead node's request is redelivered before its queue can idle out.
  if (config.cluster.idle_tenant < 2 * config.cluster.ack_wait) {
    if (*raw.idle_tenant) {
      return InvalidArgumentError("--cluster-idle-tenant-seconds " +
                                  std::to_string(raw.idle_tenant_seconds) +
                                  " must be at least twice --cluster-ack-wait-seconds (" +
                                  std::to_string(raw.ack_wait_seconds) + ")");
    }
    config.cluster.idle_tenant = 2 * config.cluster.ack_wait;  // a long ack wait's default
  }
  if (!raw.secret_file.empty()) {
    std::ifstream in(raw.secret_file);
    std::getline(in, config.cluster.secret);
    if (config.cluster.secret.size() < 16) {
      return InvalidArgumentError("--cluster-secret-file " + raw.secret_file +
                                  ": its first line must hold a secret of at least 16 characters");
    }
  } else if (const char* secret = getenv("KCORAL_CLUSTER_SECRET")) {
    config.cluster.secret = secret;
  }
  if (const char* password = getenv("KCORAL_CLUSTER_PASSWORD")) config.cluster.password = password;
  if (!config.cluster.password.empty() && config.cluster.user.empty()) {
    return InvalidArgumentError("KCORAL_CLUSTER_PASSWORD is set but --cluster-user is not");
  }
  return Status::Ok();
}

// The mode flags' texts into config's enums; IsMember admitted only texts of the tables, so
// each parse has a value (server_modes.h).
void ApplyModeFlags(const RawFlags& raw, ServerConfig& config) {
  config.device = *ParseFlag(kDeviceFlag, raw.device);
  config.housekeeping = *ParseFlag(kHousekeepingFlag, raw.housekeeping);
  config.sandbox = *ParseFlag(kSandboxFlag, raw.sandbox);
  config.sandbox_network = *ParseFlag(kSandboxNetworkFlag, raw.sandbox_network);
  config.cpu_execution = *ParseFlag(kCpuExecutionFlag, raw.cpu_execution);
}

CLI::App MakeCli() {
  return CLI::App{
      "KCoral server: runs client programs (upload, get_function, run, return) in worker\n"
      "processes and answers POST /execute and GET /health.\n\n"
      "  CPU compile server:  kcoral server --device cpu --num-workers 8 --host 0.0.0.0 --port "
      "8000\n"
      "  GPU server:          kcoral server --device gpu --gpus 0 --workers-per-gpu 8 --port "
      "8001\n",
      "kcoral server"};
}

}  // namespace

ParsedFlags ParseServerFlags(int argc, const char* const* argv, const Getenv& getenv,
                             std::ostream& out, std::ostream& err) {
  auto refuse = [&err](const Status& why) {
    err << "kcoral server: " << why.message() << "\n";
    return ParsedFlags{std::nullopt, 2};
  };
  ServerConfig config;
  if (Status status = FromEnvironment(getenv, config); !status.ok()) return refuse(status);
  RawFlags raw;
  raw.device = FlagText(config.device);
  raw.housekeeping = FlagText(config.housekeeping);
  raw.sandbox = FlagText(config.sandbox);
  raw.sandbox_network = FlagText(config.sandbox_network);
  raw.cpu_execution = FlagText(config.cpu_execution);
  CLI::App cli = MakeCli();
  cli.allow_extras(false);
  cli.option_defaults()->always_capture_default();
  for (auto add : {AddListenFlags, AddWorkerFlags, AddSandboxFlags, AddLimitFlags,
                   AddCacheAndLogFlags, AddClusterFlags, AddTenancyFlags, AddClusterPeerFlags}) {
    add(cli, config, raw);
  }
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return ParsedFlags{std::nullopt, cli.exit(error, out, err)};
  }
  if (*raw.tls_cert) config.tls = raw.tls;
  if (Status status = ApplyClusterFlags(raw, getenv, config); !status.ok()) return refuse(status);
  ApplyModeFlags(raw, config);
  std::vector<std::string> gpu_only_flags;
  for (const char* flag : kGpuOnlyFlags) {
    if (cli.count(flag) > 0) gpu_only_flags.emplace_back(flag);
  }
  if (Status status = ValidateServerConfig(config, gpu_only_flags); !status.ok()) {
    return refuse(status);
  }
  if (config.device == Device::kGpu && getenv("CUDA_VISIBLE_DEVICES") != nullptr) {
    err << "kcoral server: note: CUDA_VISIBLE_DEVICES does not restrict the server; workers are "
           "pinned by --gpus\n";
  }
  return ParsedFlags{std::move(config), 0};
}

Status ValidateServerConfig(const ServerConfig& config,
                            const std::vector<std::string>& gpu_only_flags) {
  if (config.sandbox == SandboxMode::kNone && !config.sandbox_readonly_paths.empty()) {
    return InvalidArgumentError("--sandbox-readonly-path cannot be combined with --sandbox none");
  }
  if (config.device == Device::kCpu && !gpu_only_flags.empty()) {
    return InvalidArgumentError(gpu_only_flags.front() + " applies to GPU servers (--device gpu)");
  }
  if (config.device == Device::kGpu && config.gpus.empty()) {
    return InvalidArgumentError("--gpus must name at least one GPU in GPU mode");
  }
  if (config.device == Device::kGpu && config.worker_memory_limit_mbytes != 0 &&
      config.sandbox == SandboxMode::kNone) {
    return InvalidArgumentError(
        "--worker-memory-limit-mbytes on a GPU server needs the sandbox's cgroup (CUDA reserves "
        "far more address space than it uses, so no address-space cap); drop --sandbox none");
  }
  if (config.worker_memory_limit_mbytes != 0 &&
      WorkerHeapMbytes(config) >= config.worker_memory_limit_mbytes) {
    return InvalidArgumentError(
        "--worker-heap-mbytes (" + std::to_string(WorkerHeapMbytes(config)) +
        ") must be below --worker-memory-limit-mbytes (" +
        std::to_string(config.worker_memory_limit_mbytes) + "): the heap is part of it");
  }
  if (config.sandbox == SandboxMode::kNone && config.sandbox_network != SandboxNetwork::kNone) {
    return InvalidArgumentError("--sandbox-network cannot be combined with --sandbox none");
  }
  return Status::Ok();
}

}  // namespace kc::server
