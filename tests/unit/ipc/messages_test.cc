// Golden frames: the wire form of every message of ipc/messages.h, pinned. A change here is a
// change of the conversation between the server and its workers (and Python's zygote).
#include "ipc/messages.h"

#include <gtest/gtest.h>

namespace kc::ipc {
namespace {

Frame FrameOf(const nlohmann::json& header) {
  Frame frame;
  frame.header = header;
  return frame;
}

TEST(Messages, EveryWordRoundTrips) {
  for (int i = 0; i <= static_cast<int>(MessageType::kForked); ++i) {
    const auto type = static_cast<MessageType>(i);
    ASSERT_FALSE(WordOf(type).empty()) << i;
    EXPECT_EQ(TypeOf(FrameOf({{"type", WordOf(type)}})), type) << WordOf(type);
  }
  EXPECT_EQ(TypeOf(FrameOf({{"type", "initialized_failed"}})), std::nullopt);
  EXPECT_EQ(TypeOf(FrameOf({{"type", 7}})), std::nullopt);
}

TEST(Messages, SignalsCarryOnlyTheirWord) {
  EXPECT_EQ(Signal(MessageType::kLeaseAcquire).dump(), R"({"type":"lease_acquire"})");
  EXPECT_EQ(Signal(MessageType::kLeaseRelease).dump(), R"({"type":"lease_release"})");
  EXPECT_EQ(Signal(MessageType::kLeaseGranted).dump(), R"({"type":"lease_granted"})");
  EXPECT_EQ(Signal(MessageType::kSpanBegin).dump(), R"({"type":"span_begin"})");
  EXPECT_EQ(Signal(MessageType::kSpanEnd).dump(), R"({"type":"span_end"})");
  EXPECT_EQ(Signal(MessageType::kSpanGranted).dump(), R"({"type":"span_granted"})");
  EXPECT_EQ(Signal(MessageType::kInitialize).dump(), R"({"type":"initialize"})");
  EXPECT_EQ(Signal(MessageType::kInitialized).dump(), R"({"type":"initialized"})");
  EXPECT_EQ(Signal(MessageType::kWarmUp).dump(), R"({"type":"warm_up"})");
  EXPECT_EQ(Signal(MessageType::kWarmedUp).dump(), R"({"type":"warmed_up"})");
}

TEST(Messages, StartOfTheZygoteAndOfAWorker) {
  StartMessage zygote;
  zygote.settings.device = WorkerDevice::kGpu;
  zygote.settings.gpu_arch = "sm_90a";
  EXPECT_EQ(Encode(zygote).dump(),
            R"({"settings":{"address_space_mbytes":0,"cpu_execution":"host","device":"gpu",)"
            R"("gpu_arch":"sm_90a","heap_bytes":0,"max_libraries":256},"type":"start"})");
  auto decoded = DecodeStart(FrameOf(Encode(zygote)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->settings.device, WorkerDevice::kGpu);
  EXPECT_EQ(decoded->settings.gpu_arch, "sm_90a");
  EXPECT_FALSE(decoded->worker.has_value());

  const StartMessage worker{WorkerSettings{}, WorkerSpec{"/w/w1", std::nullopt}};
  EXPECT_EQ(Encode(worker).dump(),
            R"({"settings":{"address_space_mbytes":0,"cpu_execution":"host","device":"cpu",)"
            R"("gpu_arch":"","heap_bytes":0,"max_libraries":256},"type":"start",)"
            R"("worker":{"sandbox":null,"workspace":"/w/w1"}})");
  decoded = DecodeStart(FrameOf(Encode(worker)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_TRUE(decoded->worker.has_value());
  EXPECT_EQ(decoded->worker->workspace, "/w/w1");

  EXPECT_EQ(DecodeStart(FrameOf({{"type", "start"}})).status().message(),
            "start frame: field 'settings' is not an object");
  EXPECT_EQ(DecodeStart(FrameOf({{"type", "start"}, {"settings", {{"device", "tpu"}}}}))
                .status()
                .message(),
            "start frame: worker settings: field 'device' is not a known value");
  EXPECT_EQ(DecodeStart(FrameOf({{"type", "start"},
                                 {"settings", nlohmann::json::object()},
                                 {"worker", {{"workspace", 1}}}}))
                .status()
                .message(),
            "start frame: worker spec: field 'workspace' is not a string");
}

TEST(Messages, ReadyOfAWorkerAndOfTheZygote) {
  ReadyMessage worker{42, {{"target", {{"kind", "cuda"}}}}, std::string(64, 'a')};
  EXPECT_EQ(Encode(worker).dump(),
            R"({"describe":{"target":{"kind":"cuda"}},"pid":42,"seal_key":")" +
                std::string(64, 'a') + R"(","type":"ready"})");
  EXPECT_EQ(Encode(ReadyMessage{7, nlohmann::json::object(), ""}).dump(),
            R"({"pid":7,"type":"ready"})");
  auto decoded = DecodeReady(FrameOf(Encode(worker)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->pid, 42);
  EXPECT_EQ(decoded->seal_key, std::string(64, 'a'));
  EXPECT_FALSE(DecodeReady(FrameOf({{"type", "ready"}, {"pid", "42"}})).ok());
  EXPECT_FALSE(DecodeReady(FrameOf({{"type", "ready"}, {"pid", 1}, {"describe", 3}})).ok());
}

TEST(Messages, FailedAndInitializeFailed) {
  EXPECT_EQ(Encode(MessageType::kFailed, FailedMessage{"no sandbox"}).dump(),
            R"({"error":"no sandbox","type":"failed"})");
  EXPECT_EQ(Encode(MessageType::kInitializeFailed, FailedMessage{"no GPU"}).dump(),
            R"({"error":"no GPU","type":"initialize_failed"})");
  auto failed = DecodeFailed(FrameOf({{"type", "initialize_failed"}}));
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->error, "(no reason)");
}

TEST(Messages, Run) {
  RunMessage run{"req-1", "/work/w1", 1024, 2048, {"ab", "cd"}};
  EXPECT_EQ(Encode(run).dump(),
            R"({"blobs":["ab","cd"],"max_response_bytes":2048,"output_limit_bytes":1024,)"
            R"("request_id":"req-1","type":"run","workspace":"/work/w1"})");
  auto decoded = DecodeRun(FrameOf(Encode(run)));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->blobs, run.blobs);
  auto bad = DecodeRun(FrameOf({{"type", "run"},
                                {"request_id", "r"},
                                {"workspace", "/w"},
                                {"output_limit_bytes", 1},
                                {"max_response_bytes", 1},
                                {"blobs", {1, 2}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'blobs'"), std::string::npos) << bad.status().message();
}

TEST(Messages, ProgressAndOutcome) {
  EXPECT_EQ(Encode(MessageType::kInstruction, ProgressMessage{3}).dump(),
            R"({"index":3,"type":"instruction"})");
  EXPECT_EQ(Encode(MessageType::kInstructionEnd, ProgressMessage{3}).dump(),
            R"({"index":3,"type":"instruction_end"})");
  EXPECT_EQ(Encode(OutcomeMessage{}).dump(), R"({"type":"outcome"})");
  EXPECT_EQ(Encode(OutcomeMessage{"library_limit", 5}).dump(),
            R"({"gpu_access_detected_ns":5,"retire":"library_limit","type":"outcome"})");
  auto index = DecodeProgress(FrameOf({{"type", "instruction"}, {"index", "x"}}));
  EXPECT_FALSE(index.ok());
}

TEST(Messages, ForkAndForked) {
  EXPECT_EQ(Encode(ForkMessage{WorkerSpec{"/w", std::nullopt}}).dump(),
            R"({"type":"fork","worker":{"sandbox":null,"workspace":"/w"}})");
  auto fork = DecodeFork(FrameOf({{"type", "fork"}, {"worker", {{"workspace", "/w"}}}}));
  ASSERT_TRUE(fork.ok()) << fork.status().message();
  EXPECT_EQ(fork->worker.workspace, "/w");
  EXPECT_FALSE(fork->worker.sandbox.has_value());
  auto bad = DecodeFork(FrameOf({{"type", "fork"}, {"worker", {{"workspace", 3}}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "fork frame: worker spec: field 'workspace' is not a string");
  EXPECT_EQ(Encode(ForkedMessage{12, std::nullopt}).dump(), R"({"pid":12,"type":"forked"})");
  EXPECT_EQ(Encode(ForkedMessage{12, 11}).dump(),
            R"({"namespace_init":11,"pid":12,"type":"forked"})");
  auto forked = DecodeForked(FrameOf({{"type", "forked"}, {"pid", 12}, {"namespace_init", 11}}));
  ASSERT_TRUE(forked.ok());
  EXPECT_EQ(forked->namespace_init, 11);
}

TEST(Messages, AWrongMessageIsNamed) {
  auto ready = DecodeReady(FrameOf({{"type", "outcome"}}));
  ASSERT_FALSE(ready.ok());
  EXPECT_EQ(ready.status().message(), "expected a ready frame, got outcome");
}

}  // namespace
}  // namespace kc::ipc
