// RequestRing: the last kCapacity finished /execute requests, newest last, for the dashboard
// (GET /api/status, issue 28): who sent each, how it ended, the lease it held, the verdict on
// its sealed benchmark results and where its time went (the run_timeline event's instructions).
//
// A request's run details are known where the pool answers (NoteRun, execute_route.cc), its
// ending where its reply is built (Finish); Finish joins the two by request id. Each record's
// JSON is rendered once, by the first status build that sends it (Rendered): every build sends
// all 200 (each viewer kind's text splices them, status_board.h), and building them anew each
// second was most of a build's cost, while rendering each at Finish would charge every request,
// viewed or not, on the event loop. Notes whose request never finishes here (a cluster request
// answered elsewhere) are dropped oldest first.
//
// It also counts the requests in flight by tenant (Begin/Finish), the dashboard's "queue by
// tenant" until the tenancy issue's queues report their own.
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kc::server {

// One instruction's wall time as the server saw it (pool::RunResult::InstructionTime).
struct TimelineStep {
  int index = 0;
  std::string op;  // "upload", "get_function", "run", "return"
  std::string id;  // the instruction's id, if it has one
  double ms = 0;
  double lease_wait_ms = 0;
  bool leased = false;
};

// What the pool reported for a request that reached a worker.
struct RunNote {
  std::string worker_id;
  double queue_ms = 0;
  double lease_wait_ms = 0;
  double lease_held_ms = 0;
  double span_held_ms = 0;
  std::vector<TimelineStep> timeline;
};

struct RequestRecord {
  std::string request_id;
  std::string tenant;  // empty: no keys
  int64_t finished_unix_ms = 0;
  int http_status = 0;
  std::string finish_reason;  // spec/server.md §6
  std::string error_kind;     // empty: none
  std::string error_message;  // cut to kMessageChars
  std::string integrity;      // "trusted", "flagged", "unverified" or empty (no sealed results)
  double total_ms = 0;
  RunNote run;  // empty when it never reached a worker
};

// A finished request as the dashboard sends it: its JSON text, and its tenant, by which a
// tenant's view is cut. In the JSON what is empty is left out (the page reads a missing member
// as empty or zero) and each timeline step is an array in the order of kTimelineFields.
struct RenderedRequest {
  std::string tenant;
  std::shared_ptr<const std::string> json;
};
inline constexpr const char* kTimelineFields[] = {"index",         "op",    "id", "ms",
                                                  "lease_wait_ms", "leased"};

class RequestRing {
 public:
  static constexpr size_t kCapacity = 200;
  static constexpr size_t kMessageChars = 300;
  static constexpr size_t kPendingNotes = 1024;

  void Begin(const std::string& tenant);
  void NoteRun(const std::string& request_id, RunNote note);
  // Adds `record`, with the run noted for its request id, and ends its tenant's in-flight count.
  void Finish(RequestRecord record);

  // Oldest first; renders those no build has rendered yet, outside the ring's lock.
  std::vector<RenderedRequest> Rendered() const;
  std::map<std::string, int> InFlightByTenant() const;
  uint64_t finished() const;

 private:
  mutable std::mutex mu_;
  struct Finished {
    RequestRecord record;  // not changed once finished
    mutable std::once_flag rendering;
    mutable std::shared_ptr<const std::string> json;  // set once, under `rendering`
  };
  std::deque<std::shared_ptr<const Finished>> records_;  // mu_
  std::unordered_map<std::string, RunNote> notes_;       // mu_
  std::deque<std::string> note_order_;                   // mu_: notes_' keys, oldest first
  std::map<std::string, int> in_flight_;                 // mu_
  uint64_t finished_ = 0;                                // mu_
};

}  // namespace kc::server
