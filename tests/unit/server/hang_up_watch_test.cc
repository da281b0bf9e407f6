#include "server/transport/hang_up_watch.h"

#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/unique_fd.h"

namespace kc::server {
namespace {

namespace net = boost::asio;

struct Connection {
  Connection() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    server.Reset(fds[0]);
    client.Reset(fds[1]);
  }
  UniqueFd server, client;
};

// Runs the loop long enough for a ready wait to complete.
void Spin(net::io_context& io) {
  io.restart();
  io.run_for(std::chrono::milliseconds(100));
}

// Runs the loop until `flag` is raised or two seconds pass.
bool SpinUntilRaised(net::io_context& io, const pool::CancelFlag& flag) {
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!flag.raised() && Clock::now() < deadline)
    Spin(io);
  return flag.raised();
}

TEST(HangUpWatch, ClientClosingRaisesTheFlag) {
  net::io_context io;
  Connection connection;
  auto flag = std::make_shared<pool::CancelFlag>();
  HangUpWatch watch(io.get_executor(), connection.server.get(), flag);
  Spin(io);
  EXPECT_FALSE(flag->raised());
  connection.client.Reset();
  EXPECT_TRUE(SpinUntilRaised(io, *flag));
}

TEST(HangUpWatch, BytesFromTheClientAreNotAHangUpAndStayUnread) {
  net::io_context io;
  Connection connection;
  auto flag = std::make_shared<pool::CancelFlag>();
  HangUpWatch watch(io.get_executor(), connection.server.get(), flag);
  ASSERT_EQ(::send(connection.client.get(), "GET", 3, 0), 3);
  Spin(io);
  EXPECT_FALSE(flag->raised());
  char bytes[3];
  EXPECT_EQ(::recv(connection.server.get(), bytes, 3, MSG_DONTWAIT), 3);  // still there
}

// A TLS client that closes with grace sends close_notify, then its FIN: bytes, yet a hang-up.
TEST(HangUpWatch, BytesFollowedByTheClientsCloseAreAHangUp) {
  net::io_context io;
  Connection connection;
  auto flag = std::make_shared<pool::CancelFlag>();
  HangUpWatch watch(io.get_executor(), connection.server.get(), flag);
  ASSERT_EQ(::send(connection.client.get(), "\x15\x03\x03", 3, 0), 3);
  connection.client.Reset();
  EXPECT_TRUE(SpinUntilRaised(io, *flag));
}

TEST(HangUpWatch, StoppedWatchIgnoresALaterHangUp) {
  net::io_context io;
  Connection connection;
  auto flag = std::make_shared<pool::CancelFlag>();
  std::optional<HangUpWatch> watch;
  watch.emplace(io.get_executor(), connection.server.get(), flag);
  Spin(io);
  watch.reset();  // the request finished
  connection.client.Reset();
  Spin(io);
  EXPECT_FALSE(flag->raised());
}

TEST(HangUpWatch, TheConnectionOutlivesTheWatch) {
  net::io_context io;
  Connection connection;
  auto flag = std::make_shared<pool::CancelFlag>();
  { HangUpWatch watch(io.get_executor(), connection.server.get(), flag); }
  Spin(io);
  ASSERT_EQ(::send(connection.server.get(), "ok", 2, 0), 2);  // it watched a dup
  char bytes[2];
  EXPECT_EQ(::recv(connection.client.get(), bytes, 2, 0), 2);
}

}  // namespace
}  // namespace kc::server
