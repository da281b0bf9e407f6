#include "ipc/frame.h"

#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/memfd.h"

namespace kc::ipc {
namespace {

struct SocketPair {
  SocketPair() {
    Status status = MakeSocketPair(&a, &b);
    EXPECT_TRUE(status.ok()) << status.message();
  }
  UniqueFd a, b;
};

TEST(Frame, HeaderAndTwoMemfdsArrive) {
  SocketPair pair;
  StatusOr<UniqueFd> program = MakeSealedMemfd("program", "program bytes");
  StatusOr<UniqueFd> blob = MakeSealedMemfd("blob", "blob bytes");
  ASSERT_TRUE(program.ok() && blob.ok());
  const nlohmann::json header = {{"type", "run"},
                                 {"request_id", "123e4567-e89b-42d3-a456-426614174000"},
                                 {"blobs", {"ab", "cd"}}};
  Status sent = SendFrame(pair.a.get(), header, {program->get(), blob->get()});
  ASSERT_TRUE(sent.ok()) << sent.message();

  StatusOr<Frame> frame = ReceiveFrame(pair.b.get());
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(frame->header, header);
  EXPECT_EQ(frame->type(), "run");
  ASSERT_EQ(frame->fds.size(), 2u);
  EXPECT_NE(frame->fds[0].get(), program->get());  // new descriptors, same files
  StatusOr<std::string> first = ReadWholeFd(frame->fds[0].get());
  StatusOr<std::string> second = ReadWholeFd(frame->fds[1].get());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, "program bytes");
  EXPECT_EQ(*second, "blob bytes");
}

TEST(Frame, FramesKeepTheirBoundaries) {
  SocketPair pair;
  ASSERT_TRUE(SendFrame(pair.a.get(), {{"type", "instruction"}, {"index", 0}}).ok());
  ASSERT_TRUE(SendFrame(pair.a.get(), {{"type", "instruction"}, {"index", 1}}).ok());
  for (int index = 0; index < 2; ++index) {
    StatusOr<Frame> frame = ReceiveFrame(pair.b.get());
    ASSERT_TRUE(frame.ok()) << frame.status().message();
    EXPECT_EQ(frame->header["index"], index);
    EXPECT_TRUE(frame->fds.empty());
  }
}

TEST(Frame, ReceiveFromAClosedPeerIsUnavailable) {
  SocketPair pair;
  pair.a.Reset();
  StatusOr<Frame> frame = ReceiveFrame(pair.b.get());
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), StatusCode::kUnavailable);
}

TEST(Frame, SendToAClosedPeerIsUnavailable) {
  SocketPair pair;
  pair.b.Reset();
  Status sent = SendFrame(pair.a.get(), {{"type", "ready"}});
  ASSERT_FALSE(sent.ok());
  EXPECT_EQ(sent.code(), StatusCode::kUnavailable);
}

// {"pad":"...","type":"run"} of exactly `size` bytes once dumped.
nlohmann::json HeaderOfSize(size_t size) {
  nlohmann::json header = {{"type", "run"}, {"pad", ""}};
  const size_t overhead = header.dump().size();
  header["pad"] = std::string(size - overhead, 'x');
  return header;
}

TEST(Frame, HeaderAtTheLimitArrives) {
  SocketPair pair;
  const nlohmann::json header = HeaderOfSize(kMaxHeaderBytes);
  ASSERT_EQ(header.dump().size(), kMaxHeaderBytes);
  Status sent = SendFrame(pair.a.get(), header);
  ASSERT_TRUE(sent.ok()) << sent.message();
  StatusOr<Frame> frame = ReceiveFrame(pair.b.get());
  ASSERT_TRUE(frame.ok()) << frame.status().message();
  EXPECT_EQ(frame->header, header);
}

TEST(Frame, OversizedHeaderIsRefused) {
  SocketPair pair;
  Status sent = SendFrame(pair.a.get(), HeaderOfSize(kMaxHeaderBytes + 1));
  EXPECT_FALSE(sent.ok());
  char byte;
  EXPECT_EQ(::recv(pair.b.get(), &byte, 1, MSG_DONTWAIT), -1);  // nothing was sent
  EXPECT_EQ(errno, EAGAIN);
}

TEST(Frame, TooManyDescriptorsAreRefused) {
  SocketPair pair;
  std::vector<int> fds(kMaxFds + 1, pair.a.get());
  EXPECT_FALSE(SendFrame(pair.a.get(), {{"type", "run"}}, fds).ok());
}

TEST(Frame, HeaderThatIsNotJsonIsInternal) {
  SocketPair pair;
  ASSERT_EQ(::send(pair.a.get(), "not json", 8, 0), 8);
  StatusOr<Frame> frame = ReceiveFrame(pair.b.get());
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), StatusCode::kInternal);
}

TEST(Frame, HeaderWithoutTypeIsInternal) {
  SocketPair pair;
  ASSERT_TRUE(SendFrame(pair.a.get(), {{"index", 1}}).ok());
  StatusOr<Frame> frame = ReceiveFrame(pair.b.get());
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), StatusCode::kInternal);
}

TEST(Frame, TypedFieldsReadOnlyTheExpectedType) {
  Frame frame;
  frame.header = nlohmann::json::parse(
      R"({"type": "instruction", "int": 7, "negative": -3, "big": 18446744073709551615,
          "float": 1.5, "text": "seven", "list": [7], "null": null})");
  EXPECT_EQ(frame.IntField("int"), 7);
  EXPECT_EQ(frame.IntField("negative"), -3);
  EXPECT_EQ(frame.IntField("big"), std::nullopt);  // beyond int64_t
  EXPECT_EQ(frame.IntField("float"), std::nullopt);
  EXPECT_EQ(frame.IntField("text"), std::nullopt);
  EXPECT_EQ(frame.IntField("list"), std::nullopt);
  EXPECT_EQ(frame.IntField("missing"), std::nullopt);
  EXPECT_EQ(frame.StringField("text"), "seven");
  EXPECT_EQ(frame.StringField("int"), std::nullopt);
  EXPECT_EQ(frame.StringField("null"), std::nullopt);
}

}  // namespace
}  // namespace kc::ipc
