#include "server/request_ring.h"

#include <utility>

namespace kc::server {

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
  records_.push_back(std::move(record));
  if (records_.size() > kCapacity) records_.pop_front();
  ++finished_;
}

std::vector<RequestRecord> RequestRing::Records() const {
  std::lock_guard lock(mu_);
  return {records_.begin(), records_.end()};
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
