// WorkerPool: seats, their occupants, the admission queue and the stand-by
// processes that make a fresh occupant cheap (DESIGN.md "Seats and occupants").
//
// Each seat is a thread that takes the next job in FIFO order, runs it on its
// occupant and hands the result to the job's callback. With the default of
// one request per process the occupant is retired after answering, and the
// seat takes a prepared stand-by process for its next job, so no request
// waits for Python to start. A spawner thread keeps `standby` processes ready.
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "pool/admission_queue.h"
#include "pool/event_sink.h"
#include "pool/worker_process.h"

namespace kc::pool {

struct PoolOptions {
  std::string device = "cpu";
  int seats = 1;
  int standby = 1;                  // prepared processes kept ready
  int max_requests_per_worker = 1;  // 0: unlimited reuse
  size_t max_queued_requests = 1024;
  std::chrono::milliseconds worker_wait_timeout{1800 * 1000};
  std::chrono::seconds spawn_timeout{60};
  WorkerLaunch launch;
  bool use_zygote = true;  // fork workers from a prepared process (zygote.h)
};

struct JobResult {
  bool ran = false;  // false: no seat within the wait timeout, or shutting down
  RunResult run;
  double queue_ms = 0;
  double elapsed_ms = 0;
  std::string worker_id;
  pid_t pid = -1;
};

struct Job {
  RunRequest run;  // `workspace` is filled in by the pool
  std::function<void(JobResult)> done;  // called exactly once, from a pool thread
  Clock::time_point enqueued;
  Clock::time_point wait_deadline;
};

struct PoolLoad {
  int request_capacity = 0;
  int requests_in_progress = 0;
  int requests_waiting = 0;
};

class WorkerPool {
 public:
  WorkerPool(PoolOptions options, EventSink& events);
  ~WorkerPool();

  // Creates the workspace root, starts the stand-by processes and waits for
  // the first one, whose target and versions describe the pool.
  Status Start();

  // False when the queue is full or the pool is shutting down (503 busy).
  bool Submit(std::shared_ptr<Job> job);

  PoolLoad Load() const;
  const nlohmann::json& describe() const { return describe_; }

  // Refuses new jobs, expires queued ones; running jobs finish.
  void BeginShutdown();
  // Waits for running jobs, then kills every process. Idempotent.
  void Join();
  int running() const { return running_.load(); }

 private:
  void SeatLoop(int index);
  void RunJob(const std::string& seat, std::unique_ptr<WorkerProcess>& occupant, Job& job);
  std::unique_ptr<WorkerProcess> TakeReady();
  void SpawnLoop();
  static JobResult Busy(const Job& job);

  const PoolOptions options_;
  EventSink& events_;
  std::filesystem::path workspace_root_;
  nlohmann::json describe_ = {{"target", nlohmann::json::object()},
                              {"versions", nlohmann::json::object()}};
  AdmissionQueue<Job> queue_;
  std::atomic<int> running_{0};
  std::atomic<bool> shutting_down_{false};

  std::mutex ready_mu_;
  std::condition_variable ready_cv_;
  std::deque<std::unique_ptr<WorkerProcess>> ready_;  // guarded by ready_mu_
  bool stopping_ = false;                             // guarded by ready_mu_

  std::unique_ptr<class Zygote> zygote_;  // spawner thread only
  std::vector<std::thread> seats_;
  std::thread spawner_;
};

}  // namespace kc::pool
