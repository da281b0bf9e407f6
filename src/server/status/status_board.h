// StatusBoard: the dashboard's status (GET /api/status, issue 28), built at most once per
// max_age for all viewers and cut per viewer from that one build.
//
// A build is a Snapshot from the builder (dashboard_routes.cc): a JSON object, and the last
// requests, each already rendered as JSON text (request_ring.h), which become its "requests"
// array. Two members depend on who looks: "requests" and "queue"."by_tenant" (an object keyed by
// tenant). An operator, or anyone when the server has no keys, sees them whole; a tenant sees
// only its own. Each viewer kind's text is made once per build and shared, so 64 viewers cost
// one build and a few string copies a second.
//
//   StatusBoard board([&] { return StatusBoard::Snapshot{status, ring.Rendered()}; });
//   std::shared_ptr<const std::string> body = board.View(caller, Clock::now()).text;
//
// Thread-safe: the builder runs under the board's lock, so viewers arriving during a build wait
// for it instead of starting their own. The server calls Ready on its event loop and View, which
// may build, on its parse pool (dashboard_routes.cc), so a build never stalls other requests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "server/status/request_ring.h"
#include "server/tenancy/access_keys.h"

namespace kc::server {

class StatusBoard {
 public:
  struct Snapshot {
    nlohmann::json status;                  // an object, without "requests"
    std::vector<RenderedRequest> requests;  // "requests", oldest first
  };
  using Builder = std::function<Snapshot()>;
  explicit StatusBoard(Builder build,
                       std::chrono::milliseconds max_age = std::chrono::milliseconds(1000))
      : build_(std::move(build)), max_age_(max_age) {}

  // The status as `viewer` may see it (nullopt: no keys, everything), as JSON text; built anew
  // when the last build is max_age old at `now`. `age`: how old that build is at `now`, so a
  // poller can come back just after the next one (the page does: a request shows within about
  // one poll, not two).
  struct Seen {
    std::shared_ptr<const std::string> text;
    std::chrono::milliseconds age{0};
  };
  Seen View(const std::optional<Caller>& viewer, Clock::time_point now);
  // View's answer when it is ready without a build or a cut (a fresh build, this viewer kind's
  // text made): cheap enough for the event loop, which sends the rest to a worker thread.
  std::optional<Seen> Ready(const std::optional<Caller>& viewer, Clock::time_point now) const;
  std::chrono::milliseconds max_age() const { return max_age_; }
  uint64_t builds() const;

 private:
  static std::string KindOf(const std::optional<Caller>& viewer);
  bool Fresh(Clock::time_point now) const;  // mu_ held

  const Builder build_;
  const std::chrono::milliseconds max_age_;
  mutable std::mutex mu_;
  std::optional<Clock::time_point> built_at_;                        // mu_
  Snapshot built_;                                                   // mu_
  std::map<std::string, std::shared_ptr<const std::string>> views_;  // mu_: by viewer kind
  uint64_t builds_ = 0;                                              // mu_
};

}  // namespace kc::server
