// StatusStreams: GET /api/status/stream, the dashboard's status pushed to every viewer once per
// build (server-sent events), from a thread of its own (issue 28).
//
// Polling viewers cost the server a wake-up each: 64 pages spread over the second cost it 1.2%
// of a core on a 2-core machine, and 64 pages polling just after each build (as dashboard.js
// did) answered in a burst on the event loop, where trivial requests waited behind them (their
// p99 rose 34-53%). Here one timer a second writes every viewer's event from this thread, so
// the event loop that serves /execute never waits for the dashboard; gzip-encoded where the
// viewer accepts it (a status of 75 KB is 11 KB on the wire).
//
//   StatusStreams streams(board);
//   streams.Add(std::move(socket), caller);  // the request's header read and admitted
//
// A viewer's connection is handed over after its request: it only ever receives. Each gets the
// newest build at once, then each new build; one that has not taken the last event when the
// next is due skips it, and one stuck for 30 s is closed, so a viewer that stops reading
// holds one event's memory, never a queue. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio.hpp>

#include "server/status/status_board.h"
#include "server/tenancy/access_keys.h"

namespace kc::server {

class StatusStreams {
 public:
  static constexpr size_t kMaxViewers = 256;

  // `stuck_limit`: how long one event may take to go out before its viewer is closed.
  explicit StatusStreams(StatusBoard& board,
                         std::chrono::milliseconds stuck_limit = std::chrono::seconds(30));
  ~StatusStreams();  // closes every stream
  StatusStreams(const StatusStreams&) = delete;
  StatusStreams& operator=(const StatusStreams&) = delete;

  // Takes the connection of an admitted GET /api/status/stream (its header read, nothing
  // written): answers its head and streams from now on, gzip-encoded when `gzip` (the request
  // accepts it). False, and the socket untouched, when kMaxViewers are streaming (the caller
  // answers 503).
  bool Add(boost::asio::ip::tcp::socket& socket, std::optional<Caller> viewer, bool gzip = false);
  // Ends every stream (the keys changed, or the server is stopping): pages reconnect, with the
  // key they hold, and are admitted again.
  void CloseAll();
  size_t viewers() const { return count_.load(); }

 private:
  struct Viewer;
  void Tick();
  void ArmTick();
  void Send(const std::shared_ptr<Viewer>& viewer, std::chrono::steady_clock::time_point now);
  void Watch(const std::shared_ptr<Viewer>& viewer);
  void Drop(const std::shared_ptr<Viewer>& viewer);

  StatusBoard& board_;
  const std::chrono::milliseconds stuck_limit_;
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::steady_timer tick_{io_};
  std::list<std::shared_ptr<Viewer>> viewers_;  // io_'s thread only
  // A build's text and its event, plain and deflated (io_'s thread only).
  struct Event {
    std::shared_ptr<const std::string> plain, deflated;
  };
  std::map<std::shared_ptr<const std::string>, Event> events_;
  std::atomic<size_t> count_{0};
  std::thread thread_;
};

}  // namespace kc::server
