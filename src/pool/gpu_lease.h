// GpuLease: one exclusive lease per GPU, granted in strict FIFO order
// (spec/server.md §2.6). The arbiter lives in the server, so a killed worker
// cannot leak the lease. A history ring answers "who held this GPU at time t"
// for gpu_access reports (interfered_request_id).
//
// Thread-safe. Usage (one holder at a time):
//   lease.Acquire("req-1");   // blocks until granted
//   ...                       // exclusive use of the GPU
//   lease.Release();
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kc::pool {

class GpuLease {
 public:
  explicit GpuLease(int gpu_index) : gpu_index_(gpu_index) {}

  // Blocks until `holder` owns the lease (FIFO among waiters).
  void Acquire(const std::string& holder);
  void Release();

  // The holder at steady-clock time `when_ns`, or nullopt if the GPU was free.
  std::optional<std::string> HolderAt(int64_t when_ns) const;
  // Everyone who held the lease at some time in [from_ns, to_ns], in order:
  // what a waiter waited for (workers' initialize/retire, other requests).
  std::vector<std::string> HoldersBetween(int64_t from_ns, int64_t to_ns) const;

  int gpu_index() const { return gpu_index_; }
  // Holder plus waiters.
  int depth() const;

 private:
  struct Tenure {
    int64_t start_ns, end_ns;
    std::string holder;
  };
  static constexpr size_t kHistory = 256;

  const int gpu_index_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint64_t> waiters_;  // tickets, guarded by mu_
  uint64_t next_ticket_ = 0;      // guarded by mu_
  bool held_ = false;             // guarded by mu_
  std::string holder_;            // guarded by mu_
  int64_t held_since_ns_ = 0;     // guarded by mu_
  std::deque<Tenure> history_;    // guarded by mu_
};

int64_t SteadyNowNs();

}  // namespace kc::pool
