#include "server/status/status_streams.h"

#include <sys/socket.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace kc::server {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;

// A client connection on loopback and the server's end of it, as the server's event loop holds
// it after reading the stream's request.
struct Connection {
  tcp::socket client;
  tcp::socket server;
};

Connection Connect(net::io_context& io, tcp::acceptor& acceptor, int client_receive_buffer = 0) {
  tcp::socket client(io);
  client.open(tcp::v4());
  if (client_receive_buffer > 0) {
    client.set_option(net::socket_base::receive_buffer_size(client_receive_buffer));
  }
  client.connect(acceptor.local_endpoint());
  tcp::socket server = acceptor.accept();
  return {std::move(client), std::move(server)};
}

// Reads until `events` events ("\n\n"-ended) have arrived or the deadline passes.
int ReadEvents(tcp::socket& client, int events, milliseconds deadline) {
  std::string got;
  const auto until = std::chrono::steady_clock::now() + deadline;
  client.non_blocking(true);
  int seen = 0;
  std::array<char, 1 << 16> buffer;
  while (seen < events && std::chrono::steady_clock::now() < until) {
    boost::system::error_code ec;
    const size_t n = client.read_some(net::buffer(buffer), ec);
    if (ec == net::error::would_block) {
      std::this_thread::sleep_for(milliseconds(5));
      continue;
    }
    if (ec) break;
    got.append(buffer.data(), n);
    for (size_t at = got.find("\n\n"); at != std::string::npos; at = got.find("\n\n")) {
      ++seen;
      got.erase(0, at + 2);
    }
  }
  return seen;
}

struct Fixture {
  // Large builds, one each 50 ms: a viewer that never reads fills its socket in a few.
  int builds = 0;
  StatusBoard board{
      [this] {
        return StatusBoard::Snapshot{{{"build", ++builds}, {"pad", std::string(1 << 20, 'x')}}};
      },
      milliseconds(50)};
  net::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(net::ip::address_v4::loopback(), 0)};
};

TEST(StatusStreams, AViewerThatStopsReadingIsClosedAndTheOthersKeepTheirEvents) {
  Fixture f;
  StatusStreams streams(f.board, milliseconds(300));
  Connection stuck = Connect(f.io, f.acceptor, 4096);
  Connection reading = Connect(f.io, f.acceptor);
  ASSERT_TRUE(streams.Add(stuck.server, std::nullopt));
  ASSERT_TRUE(streams.Add(reading.server, std::nullopt));
  EXPECT_FALSE(stuck.server.is_open()) << "the connection was handed over";
  EXPECT_EQ(ReadEvents(reading.client, 20, milliseconds(10000)), 20);
  EXPECT_EQ(streams.viewers(), 1u) << "the viewer that never read was closed";
}

TEST(StatusStreams, AViewerThatHangsUpIsForgottenAtOnce) {
  Fixture f;
  StatusStreams streams(f.board);
  Connection viewer = Connect(f.io, f.acceptor);
  ASSERT_TRUE(streams.Add(viewer.server, std::nullopt));
  EXPECT_EQ(ReadEvents(viewer.client, 1, milliseconds(5000)), 1);
  viewer.client.close();
  const auto until = std::chrono::steady_clock::now() + milliseconds(2000);
  while (streams.viewers() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(streams.viewers(), 0u);
}

TEST(StatusStreams, RefusesTheViewerPastTheLimitAndLeavesItsSocketAlone) {
  Fixture f;
  StatusStreams streams(f.board);
  std::vector<Connection> viewers;
  for (size_t k = 0; k < StatusStreams::kMaxViewers; ++k) {
    viewers.push_back(Connect(f.io, f.acceptor));
    ASSERT_TRUE(streams.Add(viewers.back().server, std::nullopt));
  }
  Connection refused = Connect(f.io, f.acceptor);
  EXPECT_FALSE(streams.Add(refused.server, std::nullopt));
  EXPECT_TRUE(refused.server.is_open()) << "the caller answers it";
  streams.CloseAll();
  const auto until = std::chrono::steady_clock::now() + milliseconds(2000);
  while (streams.viewers() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(streams.viewers(), 0u);
  EXPECT_TRUE(streams.Add(refused.server, std::nullopt));
}

}  // namespace
}  // namespace kc::server
