#include "server/transport/http_session.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <boost/beast/core.hpp>

#include "base/clock.h"
#include "base/sha256.h"
#include "cluster/peer_auth.h"
#include "server/core/request_id.h"
#include "server/core/server_config.h"
#include "server/core/stream_types.h"
#include "server/execute/blob_upload.h"
#include "server/execute/execute_ingest.h"
#include "server/transport/access_gate.h"
#include "server/transport/hang_up_watch.h"
#include "server/transport/reply_writer.h"

namespace kc::server {

namespace beast = boost::beast;

namespace {

constexpr auto kUseTuple = net::as_tuple(net::use_awaitable);
constexpr auto kIdleTimeout = std::chrono::seconds(120);
constexpr auto kBodyTimeout = std::chrono::seconds(600);
constexpr std::string_view kBlobsPrefix = "/blobs/";

enum class Route {
  kExecute,
  kUploadBlob,
  kLookUpBlob,
  kPeerBlobFetch,
  kPeerBlobPush,
  kHealth,
  kMetrics,
  kUsage,
  kDashboard,     // the page, its script and its style
  kStatus,        // what the page shows
  kStatusStream,  // the same, pushed once per build (status_streams.h)
  kWrongMethod,
  kNotFound
};
constexpr std::string_view kPeerBlobsPrefix = "/cluster/blobs/";

// Who may use a route: /health and the dashboard's page are open, the cluster's routes check the
// cluster's secret instead of a key (peer_auth.h), and a wrong method or an unknown path gets its
// 405 or 404.
Access AccessOf(Route route) {
  switch (route) {
    case Route::kExecute:
    case Route::kUploadBlob:
    case Route::kLookUpBlob:
    case Route::kUsage:
    case Route::kStatus:  // a tenant sees its own requests there (status_board.h)
    case Route::kStatusStream:
      return Access::kTenant;
    case Route::kMetrics:
      return Access::kOperator;
    default:
      return Access::kOpen;
  }
}

Route RouteOf(http::verb method, std::string_view target) {
  const bool post = method == http::verb::post, get = method == http::verb::get;
  if (target == "/execute") return post ? Route::kExecute : Route::kWrongMethod;
  if (target == "/blobs") return post ? Route::kUploadBlob : Route::kWrongMethod;
  if (target.starts_with(kBlobsPrefix)) {
    return method == http::verb::head ? Route::kLookUpBlob : Route::kWrongMethod;
  }
  if (target == "/cluster/blobs") return post ? Route::kPeerBlobPush : Route::kWrongMethod;
  if (target.starts_with(kPeerBlobsPrefix) && IsSha256Hex(target.substr(kPeerBlobsPrefix.size()))) {
    return get ? Route::kPeerBlobFetch : Route::kWrongMethod;
  }
  if (target == "/health") return get ? Route::kHealth : Route::kWrongMethod;
  if (target == "/metrics") return get ? Route::kMetrics : Route::kWrongMethod;
  if (target == "/usage") return get ? Route::kUsage : Route::kWrongMethod;
  if (target == "/dashboard" || target == "/dashboard/" || target == "/dashboard/dashboard.js" ||
      target == "/dashboard/dashboard.css") {
    return get ? Route::kDashboard : Route::kWrongMethod;
  }
  if (target == "/api/status") return get ? Route::kStatus : Route::kWrongMethod;
  if (target == "/api/status/stream") return get ? Route::kStatusStream : Route::kWrongMethod;
  return Route::kNotFound;
}

std::optional<std::string> ClaimedBlobHash(const http::fields& fields) {
  auto it = fields.find("X-KCoral-Blob-SHA256");
  if (it == fields.end()) return std::nullopt;
  return std::string(it->value());
}

// POST /blobs takes raw bytes, and an optional claimed hash (blob_upload.h).
Status CheckBlobUpload(const http::fields& fields) {
  if (fields[http::field::content_type] != "application/octet-stream") {
    return InvalidArgumentError("POST /blobs needs Content-Type application/octet-stream");
  }
  if (auto claimed = ClaimedBlobHash(fields); claimed && !IsSha256Hex(*claimed)) {
    return InvalidArgumentError("X-KCoral-Blob-SHA256 must be 64 lowercase hex characters");
  }
  return Status::Ok();
}

// How a request's body is taken in: streamed into its consumer, or (no
// consumer) read and dropped.
struct BodyIntake {
  StatusOr<std::unique_ptr<ExecuteIngest>> ingest = InternalError("no body");
  std::optional<BlobUpload> blob_upload;
  Status refused = Status::Ok();  // POST /blobs headers that rule the body out
  BodyConsumer* consumer = nullptr;
};

std::string_view PeerHeader(const http::fields& head) {
  auto it = head.find(cluster::kPeerHeader);
  return it == head.end() ? std::string_view() : std::string_view(it->value());
}

void PlanIntake(const Routes& routes, Route route, const http::fields& head, BodyIntake& intake) {
  if (route == Route::kExecute) {
    intake.ingest = ExecuteIngest::Start(head[http::field::content_type]);
    if (intake.ingest.ok()) intake.consumer = intake.ingest->get();
  } else if (route == Route::kUploadBlob || route == Route::kPeerBlobPush) {
    // A push from outside the cluster is refused before its body is read.
    if (route == Route::kPeerBlobPush)
      intake.refused = routes.peers.CheckPeer(PeerHeader(head), "POST", "/cluster/blobs");
    if (intake.refused.ok()) intake.refused = CheckBlobUpload(head);
    if (intake.refused.ok()) intake.consumer = &intake.blob_upload.emplace(ClaimedBlobHash(head));
  }
}

// The blob a POST /blobs or /cluster/blobs body made, or why there is none.
StatusOr<store::BlobPtr> UploadedBlob(BodyIntake& intake, const BodyResult& body) {
  const Status refused = intake.refused.ok() ? body.consumer : intake.refused;
  if (!refused.ok()) return refused;
  return intake.blob_upload->Finish();
}

// The route's reply, once the body is in. `tcp` is the connection's socket,
// watched for a hang-up while the program runs.
net::awaitable<HttpReply> Dispatch(Routes& routes, Route route, const http::request_header<>& head,
                                   BodyIntake& intake, const BodyResult& body,
                                   ExecuteArrival arrival, PlainStream& tcp) {
  switch (route) {
    case Route::kExecute: {
      if (intake.ingest.ok() && !body.consumer.ok()) intake.ingest = body.consumer;
      auto cancel = std::make_shared<pool::CancelFlag>();
      HangUpWatch watch(tcp.get_executor(), tcp.socket().native_handle(), cancel);
      auto handling = routes.execute.Handle(std::move(arrival), std::move(intake.ingest),
                                            cancel);  // named: see on_pool.h
      co_return co_await std::move(handling);
    }
    case Route::kUploadBlob:
      co_return routes.blobs.Upload(UploadedBlob(intake, body), arrival.request_id, arrival.client,
                                    arrival.received);
    case Route::kPeerBlobPush:
      co_return routes.peers.Push(PeerHeader(head), UploadedBlob(intake, body));
    case Route::kPeerBlobFetch: {
      auto fetch = routes.peers.Fetch(std::string(PeerHeader(head)),
                                      std::string(head.target()));  // named: see on_pool.h
      co_return co_await std::move(fetch);
    }
    case Route::kLookUpBlob:
      co_return routes.blobs.Lookup(head.target().substr(kBlobsPrefix.size()));
    case Route::kHealth:
      co_return routes.status.Health();
    case Route::kMetrics:
      co_return routes.status.MetricsPage();
    case Route::kUsage: {
      auto usage = routes.status.Usage(std::move(arrival.caller));  // named: see on_pool.h
      co_return co_await std::move(usage);
    }
    case Route::kDashboard:
      co_return routes.status.Dashboard(head.target());
    case Route::kStatus: {
      auto status = routes.status.StatusJson(std::move(arrival.caller));  // named: see on_pool.h
      co_return co_await std::move(status);
    }
    case Route::kWrongMethod:
      co_return EndingReply(RequestEnding::kMethodNotAllowed, "method not allowed", "");
    case Route::kStatusStream:  // handed over before this (ServeRequests)
    case Route::kNotFound:
      break;
  }
  co_return HttpReply{404, "application/json", R"({"detail":"Not Found"})", ""};
}

// GET /api/status/stream: a plain connection goes to the status streams' thread. A TLS one
// stays here and is refused: its session cannot move threads, and the page polls instead.
std::optional<HttpReply> HandOver(Routes& routes, PlainStream& stream, std::optional<Caller> caller,
                                  bool gzip) {
  return routes.status.Stream(stream.socket(), std::move(caller), gzip);
}
std::optional<HttpReply> HandOver(Routes&, TlsStream&, std::optional<Caller>, bool) {
  return HttpReply{501, "application/json",
                   R"({"detail":"GET /api/status/stream is served over plain HTTP only; poll )"
                   R"(GET /api/status over HTTPS"})",
                   ""};
}

}  // namespace

template <class Stream>
net::awaitable<void> ServeRequests(Routes& routes, Stream& stream, beast::flat_buffer& buffer,
                                   std::string client) {
  PlainStream& tcp = TcpOf(stream);
  for (;;) {
    http::request_parser<http::empty_body> header_parser;
    // No limit while reading the header: Beast would fail the header read
    // itself, and we owe the client a 413 (set below, before the body).
    header_parser.body_limit(boost::none);
    tcp.expires_after(kIdleTimeout);
    auto [header_ec, header_bytes] =
        co_await http::async_read_header(stream, buffer, header_parser, kUseTuple);
    if (header_ec) break;  // closed, timed out or malformed: nothing to answer
    const auto received = Clock::now();

    http::request_parser<http::buffer_body> parser(std::move(header_parser));
    const auto& head = parser.get();
    const Route route = RouteOf(head.method(), head.target());
    const unsigned version = head.version();
    bool keep_alive = head.keep_alive();
    // Keys (access_control.h), before a body is read; the unread body ends the connection.
    Admission admission =
        AdmitCaller(routes.services, AccessOf(route), head[http::field::authorization], client);
    if (admission.refusal) {
      auto writing = WriteReply(stream, std::move(*admission.refusal), version, false);
      co_await std::move(writing);
      break;
    }
    if (route == Route::kStatusStream) {
      // The connection leaves this loop: from now on it only receives the status.
      const bool gzip = head[http::field::accept_encoding].find("gzip") != std::string_view::npos;
      std::optional<HttpReply> refusal =
          HandOver(routes, stream, std::move(admission.caller), gzip);
      if (!refusal) co_return;
      auto writing = WriteReply(stream, std::move(*refusal), version, false);
      co_await std::move(writing);
      break;
    }
    const uint64_t limit = routes.services.config.max_request_bytes;
    const bool upload =
        route == Route::kExecute || route == Route::kUploadBlob || route == Route::kPeerBlobPush;
    if (upload && parser.content_length() && *parser.content_length() > limit) {
      // 413 without reading the body (spec §1.5); the connection cannot be reused.
      HttpReply reply = RequestTooLarge(routes.services, ChooseRequestId(SuppliedRequestIds(head)),
                                        *parser.content_length());
      auto writing = WriteReply(stream, std::move(reply), version, false);
      co_await std::move(writing);
      break;
    }
    parser.body_limit(limit);
    tcp.expires_after(kBodyTimeout);

    std::string request_id;
    if (upload) request_id = ChooseRequestId(SuppliedRequestIds(head));
    BodyIntake intake;
    PlanIntake(routes, route, head, intake);
    auto reading = ReadBody(stream, buffer, parser, intake.consumer, routes.services.cpu_pool);
    BodyResult body = co_await std::move(reading);
    if (body.end == BodyEnd::kBroken) break;  // nobody to answer
    if (body.end == BodyEnd::kTooLarge) {
      HttpReply reply =
          RequestTooLarge(routes.services, request_id.empty() ? NewUuid() : request_id, limit + 1);
      auto writing = WriteReply(stream, std::move(reply), version, false);
      co_await std::move(writing);
      break;
    }
    keep_alive = parser.get().keep_alive();
    tcp.expires_never();  // executions may run for many minutes
    ExecuteArrival arrival{request_id, client, received, body.bytes};
    arrival.caller = std::move(admission.caller);
    if (auto key = parser.get().find("Idempotency-Key"); key != parser.get().end()) {
      arrival.idempotency_key = std::string(key->value());
    }
    auto dispatching = Dispatch(routes, route, parser.get(), intake, body, std::move(arrival), tcp);
    HttpReply reply = co_await std::move(dispatching);
    tcp.expires_after(kBodyTimeout);
    auto writing = WriteReply(stream, std::move(reply), version, keep_alive);
    if (auto write_ec = co_await std::move(writing); write_ec || !keep_alive) break;
  }
}

template net::awaitable<void> ServeRequests(Routes&, PlainStream&, beast::flat_buffer&,
                                            std::string);
template net::awaitable<void> ServeRequests(Routes&, TlsStream&, beast::flat_buffer&, std::string);

}  // namespace kc::server
