#include "server/status/request_ring.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "base/rounded.h"

namespace kc::server {

namespace {

std::string JsonOf(const RequestRecord& r) {
  nlohmann::json timeline = nlohmann::json::array();
  for (const TimelineStep& step : r.run.timeline) {
    timeline.push_back(
        {step.index, step.op, step.id, Rounded(step.ms), Rounded(step.lease_wait_ms), step.leased});
  }
  nlohmann::json out = {{"request_id", r.request_id},
                        {"finished_unix_ms", r.finished_unix_ms},
                        {"http_status", r.http_status},
                        {"finish_reason", r.finish_reason},
                        {"total_ms", Rounded(r.total_ms)}};
  auto text = [&](const char* key, const std::string& value) {
    if (!value.empty()) out[key] = value;
  };
  auto number = [&](const char* key, double value) {
    if (value != 0) out[key] = Rounded(value);
  };
  text("tenant", r.tenant);
  text("error_kind", r.error_kind);
  text("error_message", r.error_message);
  text("integrity", r.integrity);
  text("worker_id", r.run.worker_id);
  number("queue_ms", r.run.queue_ms);
  number("lease_wait_ms", r.run.lease_wait_ms);
  number("lease_held_ms", r.run.lease_held_ms);
  number("span_held_ms", r.run.span_held_ms);
  if (!timeline.empty()) out["timeline"] = std::move(timeline);
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void RequestRing::Begin(const std::string& tenant) {
  std::lock_guard lock(mu_);
  ++in_flight_[tenant];
}

void RequestRing::NoteRun(const std::string& request_id, RunNote note) {
  std::lock_guard lock(mu_);
  if (notes_.insert_or_assign(request_id, std::move(note)).second)
    note_order_.push_back(request_id);
  while (note_order_.size() > kPendingNotes) {
    notes_.erase(note_order_.front());
    note_order_.pop_front();
  }
}

void RequestRing::Finish(RequestRecord record) {
  if (record.error_message.size() > kMessageChars) record.error_message.resize(kMessageChars);
  std::lock_guard lock(mu_);
  if (auto note = notes_.find(record.request_id); note != notes_.end()) {
    record.run = std::move(note->second);
    notes_.erase(note);  // its key in note_order_ goes when it reaches the front
  }
  if (auto it = in_flight_.find(record.tenant); it != in_flight_.end() && --it->second <= 0) {
    in_flight_.erase(it);
  }
  auto finished = std::make_shared<Finished>();
  finished->record = std::move(record);
  records_.push_back(std::move(finished));
  if (records_.size() > kCapacity) records_.pop_front();
  ++finished_;
}

std::vector<RenderedRequest> RequestRing::Rendered() const {
  std::vector<std::shared_ptr<const Finished>> records;
  {
    std::lock_guard lock(mu_);
    records.assign(records_.begin(), records_.end());
  }
  std::vector<RenderedRequest> out;
  out.reserve(records.size());
  for (const auto& finished : records) {
    std::call_once(finished->rendering, [&finished] {
      finished->json = std::make_shared<const std::string>(JsonOf(finished->record));
    });
    out.push_back({finished->record.tenant, finished->json});
  }
  return out;
}

std::map<std::string, int> RequestRing::InFlightByTenant() const {
  std::lock_guard lock(mu_);
  return in_flight_;
}

uint64_t RequestRing::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

}  // namespace kc::server
