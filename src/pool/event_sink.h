// EventSink: where the pool reports lifecycle events (worker_ready,
// worker_retired, ...). Implemented by the server's JSONL event log; the pool
// does not know where events go. Must be thread-safe.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/event_level.h"

namespace kc::pool {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Emit(EventLevel level, std::string_view event, nlohmann::json fields) = 0;
};

}  // namespace kc::pool
