#include "server/status/event_log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/utc_time.h"

namespace kc::server {

namespace {

const char* LevelName(EventLevel level) {
  switch (level) {
    case EventLevel::kInfo:
      return "INFO";
    case EventLevel::kWarning:
      return "WARNING";
    case EventLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

// `<timestamp> <LEVEL> <event> key=value ...`, long and bulky fields left out.
std::string ConsoleLine(const std::string& timestamp, const char* level, std::string_view event,
                        const nlohmann::json& fields) {
  char head[96];
  std::snprintf(head, sizeof head, "%s %-7s ", timestamp.c_str(), level);
  std::string line = head + std::string(event);
  for (const auto& [key, value] : fields.items()) {
    if (key == "traceback" || key == "versions" || key == "config" || key == "program") continue;
    std::string text = value.is_string()
                           ? value.get<std::string>()
                           : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (value.is_number_float()) {
      char number[32];
      std::snprintf(number, sizeof number, "%.1f", value.get<double>());
      text = number;
    }
    if (text.size() > 120) text = text.substr(0, 117) + "...";
    line += " " + key + "=" + text;
  }
  return line;
}

}  // namespace

EventLog::EventLog(const std::string& log_dir, bool console, bool keep_programs)
    : console_(console), keep_programs_(keep_programs) {
  if (!log_dir.empty()) {
    std::filesystem::path base = std::filesystem::path(log_dir) / "runs";
    std::string stamp = FormatUtcNow("%Y%m%dT%H%M%S", 3);
    std::error_code ec;
    std::filesystem::create_directories(base, ec);
    run_dir_ = base / stamp;
    for (int n = 1; std::filesystem::exists(run_dir_); ++n)
      run_dir_ = base / (stamp + "-" + std::to_string(n));
    std::filesystem::create_directories(run_dir_ / "programs", ec);
    file_.open(run_dir_ / "events.jsonl", std::ios::app);
  }
  writer_ = std::thread([this] { WriterLoop(); });
}

EventLog::~EventLog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  writer_.join();
}

void EventLog::NameTenant(const std::string& request_id, const std::string& tenant) {
  std::lock_guard lock(tenants_mu_);
  if (!tenants_.insert_or_assign(request_id, tenant).second) return;
  named_.push_back(request_id);
  if (named_.size() > kNamedRequests) {
    tenants_.erase(named_.front());
    named_.pop_front();
  }
}

void EventLog::Emit(EventLevel level, std::string_view event, nlohmann::json fields) {
  if (auto id = fields.find("request_id"); id != fields.end() && id->is_string()) {
    std::lock_guard lock(tenants_mu_);
    if (auto named = tenants_.find(id->get<std::string>()); named != tenants_.end()) {
      fields["tenant"] = named->second;
    }
  }
  std::string timestamp = FormatUtcNow("%Y-%m-%dT%H:%M:%S", 3);
  nlohmann::ordered_json record = {
      {"timestamp", timestamp}, {"level", LevelName(level)}, {"event", event}};
  for (auto& [key, value] : fields.items())
    record[key] = value;
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string console = console_ ? ConsoleLine(timestamp, LevelName(level), event, fields) : "";
  std::lock_guard lock(mu_);
  if (!run_dir_.empty()) lines_.push_back(std::move(line));
  if (console_) console_lines_.push_back(std::move(console));
  cv_.notify_all();
}

void EventLog::SaveProgram(const std::string& request_id, const std::string& program_json) {
  if (!keep_programs_ || run_dir_.empty()) return;
  std::ofstream out(run_dir_ / "programs" / (request_id + ".json"), std::ios::binary);
  out << program_json;
}

void EventLog::WriterLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !lines_.empty() || !console_lines_.empty(); });
    std::deque<std::string> lines, console;
    lines.swap(lines_);
    console.swap(console_lines_);
    bool stop = stopping_;
    lock.unlock();
    for (const auto& line : lines)
      file_ << line << '\n';
    if (!lines.empty()) file_.flush();
    for (const auto& line : console)
      std::fprintf(stderr, "%s\n", line.c_str());
    lock.lock();
    if (stop && lines_.empty() && console_lines_.empty()) return;
  }
}

}  // namespace kc::server
