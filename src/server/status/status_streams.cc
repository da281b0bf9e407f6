#include "server/status/status_streams.h"

#include <unistd.h>

#include <array>
#include <map>
#include <utility>

#include <boost/beast/zlib/deflate_stream.hpp>

#include "base/clock.h"

namespace kc::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

using namespace std::string_view_literals;

namespace {

// The body ends when the connection does (no length, no chunks): the simplest framing an
// EventSource, a fetch() stream or httpx reads. The head's fields, then how it ends: plain, or
// gzip-encoded with the gzip member's header (RFC 1952: deflate, no name, no time, unknown OS)
// before the first deflated event.
constexpr std::string_view kHeadFields =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/event-stream\r\n"
    "Cache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "Connection: close\r\n";
constexpr std::string_view kPlainHeadEnd = "\r\n";
constexpr std::string_view kGzipHeadEnd =
    "Content-Encoding: gzip\r\n\r\n"
    "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"sv;

std::string EventOf(const std::string& status) {
  std::string event;
  event.reserve(status.size() + 8);
  event.append("data: ").append(status).append("\n\n");  // the JSON holds no newline
  return event;
}

// `event` deflated on its own and ended by a full flush, so it follows any earlier event's
// bytes in one deflate stream: every gzip viewer of a build gets the same bytes, compressed
// once (a status of 75 KB is 11 KB, which the loopback and a viewer's reads feel).
std::string DeflatedOf(const std::string& event) {
  boost::beast::zlib::deflate_stream deflate;
  deflate.reset(1, 15, 8, boost::beast::zlib::Strategy::normal);
  std::string out(deflate.upper_bound(event.size()) + 64, '\0');
  boost::beast::zlib::z_params zs;
  zs.next_in = event.data();
  zs.avail_in = event.size();
  zs.next_out = out.data();
  zs.avail_out = out.size();
  boost::system::error_code ec;
  deflate.write(zs, boost::beast::zlib::Flush::full, ec);
  out.resize(zs.total_out);
  return out;
}

}  // namespace

struct StatusStreams::Viewer {
  tcp::socket socket;
  std::optional<Caller> caller;
  bool gzip = false;  // it sent Accept-Encoding: gzip
  bool head_sent = false;
  bool writing = false;
  bool dropped = false;
  std::chrono::steady_clock::time_point writing_since;
  std::shared_ptr<const std::string> last_status;  // the build it was last sent
  std::array<char, 64> ignored;                    // what it sends, read and dropped
};

StatusStreams::StatusStreams(StatusBoard& board, std::chrono::milliseconds stuck_limit)
    : board_(board), stuck_limit_(stuck_limit), work_(net::make_work_guard(io_)) {
  ArmTick();
  thread_ = std::thread([this] { io_.run(); });
}

StatusStreams::~StatusStreams() {
  net::post(io_, [this] {
    tick_.cancel();
    for (auto& viewer : std::list(viewers_))
      Drop(viewer);
  });
  work_.reset();
  thread_.join();
}

bool StatusStreams::Add(tcp::socket& socket, std::optional<Caller> viewer, bool gzip) {
  if (count_.fetch_add(1) >= kMaxViewers) {
    count_.fetch_sub(1);
    return false;
  }
  boost::system::error_code ec;
  const tcp protocol = socket.local_endpoint(ec).protocol();
  const tcp::socket::native_handle_type fd = ec ? -1 : socket.release(ec);
  if (ec) {  // the client is gone already
    count_.fetch_sub(1);
    socket.close(ec);
    return true;
  }
  net::post(io_, [this, protocol, fd, viewer = std::move(viewer), gzip]() mutable {
    auto added = std::make_shared<Viewer>(Viewer{tcp::socket(io_), std::move(viewer), gzip});
    boost::system::error_code assigned;
    added->socket.assign(protocol, fd, assigned);
    if (assigned) {  // never thrown on this thread: the stream is lost, the server is not
      ::close(fd);
      count_.fetch_sub(1);
      return;
    }
    viewers_.push_back(added);
    Watch(added);
    Send(added, std::chrono::steady_clock::now());
  });
  return true;
}

void StatusStreams::CloseAll() {
  net::post(io_, [this] {
    for (auto& viewer : std::list(viewers_))
      Drop(viewer);
  });
}

void StatusStreams::Tick() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& viewer : std::list(viewers_)) {
    if (!viewer->writing) {
      Send(viewer, now);
    } else if (now - viewer->writing_since > stuck_limit_) {
      Drop(viewer);  // stopped reading: its event would wait forever
    }                // else: still taking the last event; it skips this one
  }
  ArmTick();
}

void StatusStreams::ArmTick() {
  tick_.expires_after(board_.max_age());
  tick_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Tick();
  });
}

void StatusStreams::Send(const std::shared_ptr<Viewer>& viewer,
                         std::chrono::steady_clock::time_point now) {
  // Viewers of one kind share one text per build (status_board.h), so its event is made once
  // and held by the writes that send it; texts no viewer holds any more are forgotten.
  StatusBoard::Seen seen = board_.View(viewer->caller, Clock::now());
  if (seen.text == viewer->last_status) return;
  Event& event = events_[seen.text];
  if (!event.plain) {
    std::erase_if(events_, [](const auto& entry) { return entry.first.use_count() == 1; });
    event.plain = std::make_shared<const std::string>(EventOf(*seen.text));
  }
  if (viewer->gzip && !event.deflated) {
    event.deflated = std::make_shared<const std::string>(DeflatedOf(*event.plain));
  }
  std::shared_ptr<const std::string> bytes = viewer->gzip ? event.deflated : event.plain;
  viewer->last_status = seen.text;
  viewer->writing = true;
  viewer->writing_since = now;
  auto done = [this, viewer, bytes](const boost::system::error_code& ec, size_t) {
    viewer->writing = false;
    if (ec) Drop(viewer);  // the viewer went away
  };
  if (!viewer->head_sent) {
    viewer->head_sent = true;
    const std::array<net::const_buffer, 3> head_and_event = {
        net::buffer(kHeadFields), net::buffer(viewer->gzip ? kGzipHeadEnd : kPlainHeadEnd),
        net::buffer(*bytes)};
    net::async_write(viewer->socket, head_and_event, std::move(done));
  } else {
    net::async_write(viewer->socket, net::buffer(*bytes), std::move(done));
  }
}

void StatusStreams::Watch(const std::shared_ptr<Viewer>& viewer) {
  // A viewer sends nothing; its read ends when it hangs up, and so does its stream, at once
  // rather than at the next write.
  viewer->socket.async_read_some(net::buffer(viewer->ignored),
                                 [this, viewer](const boost::system::error_code& ec, size_t) {
                                   if (ec) {
                                     Drop(viewer);
                                   } else if (!viewer->dropped) {
                                     Watch(viewer);
                                   }
                                 });
}

void StatusStreams::Drop(const std::shared_ptr<Viewer>& viewer) {
  if (viewer->dropped) return;
  viewer->dropped = true;
  boost::system::error_code ignored;
  viewer->socket.shutdown(tcp::socket::shutdown_both, ignored);
  viewer->socket.close(ignored);
  viewers_.remove(viewer);
  count_.fetch_sub(1);
}

}  // namespace kc::server
