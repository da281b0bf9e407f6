// ServerConfig: every `kcoral server` setting (spec/server.md §1.2), filled
// by main.cc from flags and environment variables. Modes are enums, parsed
// there once (server_modes.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_options.h"
#include "server/core/server_modes.h"
#include "tls/identity.h"

namespace kc::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::optional<tls::TlsIdentity> tls;  // --tls-cert and --tls-key: HTTPS; none: plain HTTP
  Device device = Device::kGpu;
  std::vector<int> gpus = {0};
  int num_workers = 1;
  int workers_per_gpu = 8;
  int standby_workers = -1;      // -1: one per seat
  int cuda_max_connections = 1;  // CUDA_DEVICE_MAX_CONNECTIONS of GPU workers
  pool::HousekeepingPolicy housekeeping = pool::HousekeepingPolicy::kOutsideSpans;
  double off_lease_gpu_seconds = 1;  // a run's GPU use off its lease before a kill; 0: off
  int worker_cpu_threads = 0;        // OpenMP/BLAS threads per worker; 0: min(4, cores)
  int worker_heap_mbytes = -1;       // heap faulted in per worker; -1: 64 on GPU, 0 on CPU
  int max_requests_per_worker = 1;
  double worker_termination_grace_seconds = 5;
  SandboxMode sandbox = SandboxMode::kNamespaces;
  SandboxNetwork sandbox_network = SandboxNetwork::kNone;
  std::vector<std::string> sandbox_readonly_paths;
  int worker_max_processes = 512;  // cgroup pids limit per worker (threads count too)
  double worker_wait_timeout_seconds = 1800;
  double default_timeout_seconds = 300;
  double max_timeout_seconds = 900;
  uint64_t max_request_bytes = 268435456;
  uint64_t max_response_bytes = 1073741824;
  int64_t output_limit_bytes = 1048576;
  int64_t max_output_limit_bytes = 268435456;
  uint64_t max_queued_requests = 1024;
  uint64_t cache_capacity_bytes = 17179869184ull;
  std::string disk_cache_dir;
  std::string build_cache_dir;  // compile caches per identical program (sandbox); '' disables
  uint64_t build_cache_capacity_mbytes = 4096;
  uint64_t disk_cache_capacity_mbytes = 16384;
  std::string log_dir = "logs";
  bool log_console = true;
  bool log_programs = true;
  CpuExecution cpu_execution = CpuExecution::kHost;
  std::string python = "python3";  // interpreter that runs the workers
  bool zygote = true;              // fork workers from a prepared process
  uint64_t worker_memory_limit_mbytes =
      0;  // per worker: cgroup memory (+ address space on CPU); 0: none
  // Set only from the environment (no flag), for the workers' settings (ipc/worker_settings.h):
  // the zygote's imports (KCORAL_PRELOAD, comma-separated; unset: its device's default) and the
  // uploaded libraries a reused worker may hold (KCORAL_MAX_LIBRARIES_PER_WORKER).
  std::optional<std::vector<std::string>> worker_preload;
  // --cluster and its options (docs/cluster.md); no servers: a single node, as before.
  cluster::ClusterOptions cluster;
  std::string node_url;  // how other nodes and clients reach this one; '' derives it
  // --auth-keys: the file of API keys (server/access_keys.h); empty: no keys, as always.
  std::string auth_keys;
  int quota_window_seconds = 3600;  // the window of the limits' gpu/cpu seconds (tenant_quotas.h)
  uint64_t max_libraries_per_worker = 256;
  int parse_threads = 2;
};

// Host threads per worker (--worker-cpu-threads; 0 picks min(4, cores)): with one OpenMP
// thread per core the seed's check ran 18x slower on the H200 (docs/gpu-scheduling.md).
inline int WorkerCpuThreads(const ServerConfig& config) {
  if (config.worker_cpu_threads > 0) return config.worker_cpu_threads;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return cores > 0 && cores < 4 ? cores : 4;
}

// Heap faulted in ahead per worker (--worker-heap-mbytes; -1 picks 64 MiB on GPU servers, where
// a request's host work runs under the GPU lease, and none on CPU servers).
inline unsigned WorkerHeapMbytes(const ServerConfig& config) {
  if (config.worker_heap_mbytes >= 0) return static_cast<unsigned>(config.worker_heap_mbytes);
  return config.device == Device::kGpu ? 64u : 0u;
}

}  // namespace kc::server
