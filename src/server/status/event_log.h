// EventLog: the server's JSONL event stream (spec/server.md §6).
//
// One file per run, `<log_dir>/runs/<UTC timestamp>/events.jsonl`, plus
// `programs/<request id>.json`. Lines are written by a background thread, so
// the event loop never waits for the disk; a console mirror goes to stderr.
// Logging failures never fail a request. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "pool/event_sink.h"

namespace kc::server {

class EventLog : public pool::EventSink {
 public:
  // An empty log_dir disables the file; console mirroring is separate.
  EventLog(const std::string& log_dir, bool console, bool keep_programs);
  ~EventLog() override;

  void Emit(EventLevel level, std::string_view event, nlohmann::json fields) override;
  void SaveProgram(const std::string& request_id, const std::string& program_json);
  // Every later line with this request_id names its tenant (the last kNamedRequests requests).
  void NameTenant(const std::string& request_id, const std::string& tenant);
  static constexpr size_t kNamedRequests = 4096;
  const std::filesystem::path& run_dir() const { return run_dir_; }

 private:
  void WriterLoop();

  std::filesystem::path run_dir_;
  const bool console_;
  const bool keep_programs_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> lines_;          // guarded by mu_
  std::deque<std::string> console_lines_;  // guarded by mu_
  bool stopping_ = false;                  // guarded by mu_
  std::ofstream file_;                     // writer thread only
  std::mutex tenants_mu_;
  std::unordered_map<std::string, std::string> tenants_;  // request id -> tenant; tenants_mu_
  std::deque<std::string> named_;                         // in naming order; tenants_mu_
  std::thread writer_;
};

}  // namespace kc::server
