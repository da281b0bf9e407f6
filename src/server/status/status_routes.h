// StatusRoutes: what the server says about itself. GET /health (spec/protocol.md §1.3: exactly
// the reference keys, then ours), GET /metrics (the same load, with counters, in the
// Prometheus text format), GET /usage (a tenant's use against its budget), and the live
// dashboard of issue 28: GET /dashboard with its script and style (static, embedded, open),
// GET /api/status (the JSON the page polls, built at most once a second for all viewers:
// status_board.h) and GET /api/status/stream (status_streams.h).
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include <boost/asio.hpp>

#include "server/core/http_reply.h"
#include "server/core/services.h"
#include "server/status/gpu_telemetry.h"
#include "server/status/status_board.h"
#include "server/status/status_streams.h"
#include "server/tenancy/access_control.h"

namespace kc::server {

class StatusRoutes {
 public:
  // `telemetry`: the GPUs' NVML readings (none on a CPU server).
  StatusRoutes(Services& services, GpuTelemetry* telemetry);
  ~StatusRoutes();  // ends the streams first: their builds read the pool and the cluster

  HttpReply Health() const;
  HttpReply MetricsPage() const;
  // The caller's usage and remaining budget; an operator's key gets every tenant's.
  net::awaitable<HttpReply> Usage(std::optional<Caller> caller);
  HttpReply Dashboard(std::string_view target) const;
  net::awaitable<HttpReply> StatusJson(std::optional<Caller> caller);
  // Takes the connection (nullopt), or the reply when it cannot.
  std::optional<HttpReply> Stream(net::ip::tcp::socket& socket, std::optional<Caller> caller,
                                  bool gzip);
  // Ends every stream: the keys changed, or the server is stopping.
  void CloseStreams() { streams_->CloseAll(); }

 private:
  // The dashboard's status, whole (status_board.h cuts it per viewer).
  StatusBoard::Snapshot Build() const;

  Services& services_;
  GpuTelemetry* const telemetry_;
  StatusBoard board_{[this] { return Build(); }};
  std::unique_ptr<StatusStreams> streams_;
};

}  // namespace kc::server
