// RunSession against a worker played by the test over a real socketpair, with a real arbiter
// over made-up GPU indices, in each lease mode. The worker's process is a real child (`sleep`),
// whose pidfd the session watches.
#include "pool/run_session.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "base/memfd.h"
#include "ipc/messages.h"

namespace kc::pool {
namespace {

using namespace std::chrono_literals;
using ipc::MessageType;

class FakeWorker {
 public:
  FakeWorker() {
    EXPECT_TRUE(ipc::MakeSocketPair(&server_, &worker_).ok());
    auto child = ChildProcess::Spawn({{"/bin/sleep", "30"}, {}, {}});
    EXPECT_TRUE(child.ok()) << child.status().message();
    child_ = std::move(child).value();
  }
  ~FakeWorker() { child_.KillTreeAndReap(); }

  // Runs `request` in a session on its own thread; Finish() joins it.
  void Start(const RunRequest& request) {
    session_ = std::thread([this, &request] {
      result_ = RunSession({child_, server_.get(), nullptr, "key"}, request).Run();
    });
  }
  RunResult Finish() {
    session_.join();
    return std::move(result_);
  }

  ipc::Frame Receive() {
    StatusOr<ipc::Frame> frame = ipc::ReceiveFrame(worker_.get());
    EXPECT_TRUE(frame.ok()) << frame.status().message();
    return frame.ok() ? std::move(frame).value() : ipc::Frame{};
  }
  void Send(const nlohmann::json& header) {
    ASSERT_TRUE(ipc::SendFrame(worker_.get(), header).ok());
  }
  // Sends `ask` and expects `granted` back.
  void Ask(MessageType ask, MessageType granted) {
    Send(ipc::Signal(ask));
    EXPECT_EQ(ipc::TypeOf(Receive()), granted);
  }
  void Answer() {
    auto outcome = MakeSealedMemfd("outcome", R"({"status":"COMPLETED"})");
    auto parts = MakeSealedMemfd("parts", "");
    ASSERT_TRUE(outcome.ok() && parts.ok());
    ASSERT_TRUE(ipc::SendFrame(worker_.get(), ipc::Encode(ipc::OutcomeMessage{}),
                               {outcome->get(), parts->get()})
                    .ok());
  }
  void Close() { worker_.Reset(); }

 private:
  UniqueFd server_, worker_;
  ChildProcess child_;
  std::thread session_;
  RunResult result_;
};

RunRequest Request(LeaseMode mode, GpuLease* lease) {
  RunRequest request;
  request.request_id = "req-1";
  request.program_json = "{}";
  request.workspace = "/tmp";
  request.max_response_bytes = 1 << 20;
  request.timeout = 5s;
  request.lease_mode = mode;
  request.lease = lease;
  return request;
}

TEST(RunSession, SharedLeaseIsTakenGivenBackAndMeasured) {
  GpuArbiter arbiter({7});
  GpuLease lease(arbiter, {7});
  FakeWorker worker;
  const RunRequest request = Request(LeaseMode::kShared, &lease);
  worker.Start(request);
  StatusOr<ipc::RunMessage> run = ipc::DecodeRun(worker.Receive());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->request_id, "req-1");
  worker.Send(ipc::Encode(MessageType::kInstruction, ipc::ProgressMessage{0}));
  worker.Ask(MessageType::kLeaseAcquire, MessageType::kLeaseGranted);
  EXPECT_EQ(lease.HolderAt(NowNs()), "req-1");
  worker.Ask(MessageType::kSpanBegin, MessageType::kSpanGranted);
  std::this_thread::sleep_for(5ms);
  worker.Send(ipc::Signal(MessageType::kSpanEnd));
  worker.Send(ipc::Encode(MessageType::kInstructionEnd, ipc::ProgressMessage{0}));
  worker.Send(ipc::Signal(MessageType::kLeaseRelease));
  worker.Answer();
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kOutcome) << result.message;
  EXPECT_EQ(result.outcome_json, R"({"status":"COMPLETED"})");
  EXPECT_EQ(result.spans, 1);
  EXPECT_GE(result.span_held_ms, 4.0);
  EXPECT_GT(result.lease_held_ms, 0.0);
  ASSERT_EQ(result.instruction_times.size(), 1u);
  EXPECT_TRUE(result.instruction_times[0].leased);  // held when the instruction ended
  EXPECT_EQ(lease.depth(), 0);
  EXPECT_EQ(result.seal_key, "key");
}

// User code can send lease_release itself to run on the GPU off the lease (issue 27): only the
// instructions where the engine gives the lease back may.
TEST(RunSession, AReleaseWhereTheProgramGivesNoLeaseBackIsRefused) {
  GpuArbiter arbiter({3});
  GpuLease lease(arbiter, {3});
  FakeWorker worker;
  RunRequest request = Request(LeaseMode::kShared, &lease);
  request.releases_at = {false, true};  // a GPU run, then a cpu_only run
  worker.Start(request);
  worker.Receive();
  worker.Send(ipc::Encode(MessageType::kInstruction, ipc::ProgressMessage{0}));
  worker.Ask(MessageType::kLeaseAcquire, MessageType::kLeaseGranted);
  worker.Send(ipc::Signal(MessageType::kLeaseRelease));                // forged
  worker.Ask(MessageType::kLeaseAcquire, MessageType::kLeaseGranted);  // a round trip: read
  EXPECT_EQ(lease.HolderAt(NowNs()), "req-1");                         // still ours
  worker.Send(ipc::Encode(MessageType::kInstructionEnd, ipc::ProgressMessage{0}));
  worker.Send(ipc::Encode(MessageType::kInstruction, ipc::ProgressMessage{1}));
  worker.Send(ipc::Signal(MessageType::kLeaseRelease));  // the engine's, before a cpu_only run
  worker.Ask(MessageType::kSpanBegin, MessageType::kSpanGranted);
  EXPECT_EQ(lease.HolderAt(NowNs()), std::nullopt);
  worker.Send(ipc::Signal(MessageType::kSpanEnd));
  worker.Send(ipc::Encode(MessageType::kInstructionEnd, ipc::ProgressMessage{1}));
  worker.Answer();
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kOutcome) << result.message;
  EXPECT_EQ(result.refused_releases, 1);
}

TEST(RunSession, AnInstructionOutOfOrderIsAForgery) {
  GpuArbiter arbiter({4});
  GpuLease lease(arbiter, {4});
  FakeWorker worker;
  RunRequest request = Request(LeaseMode::kShared, &lease);
  request.releases_at = {false, false, true};
  worker.Start(request);
  worker.Receive();
  worker.Send(ipc::Encode(MessageType::kInstruction, ipc::ProgressMessage{0}));
  worker.Send(ipc::Encode(MessageType::kInstruction, ipc::ProgressMessage{2}));  // posing as 2
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kBroken);
  EXPECT_NE(result.message.find("out of order"), std::string::npos) << result.message;
}

TEST(RunSession, SharedLeaseWaitsAreMeasuredAndNeverConsumeTheBudget) {
  GpuArbiter arbiter({0});
  GpuLease lease(arbiter, {0});
  lease.Acquire("other");
  FakeWorker worker;
  RunRequest request = Request(LeaseMode::kShared, &lease);
  request.timeout = 100ms;
  worker.Start(request);
  worker.Receive();
  std::thread release([&] {
    std::this_thread::sleep_for(200ms);
    lease.Release();
  });
  worker.Ask(MessageType::kLeaseAcquire, MessageType::kLeaseGranted);
  release.join();
  worker.Answer();  // 200 ms after the run began, within the budget of 100 ms plus the wait
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kOutcome) << result.message;
  EXPECT_GE(result.lease_wait_ms, 150.0);
  EXPECT_EQ(result.lease_waited_for, std::vector<std::string>{"other"});
  EXPECT_EQ(lease.depth(), 0);  // given back at the end without a lease_release
}

TEST(RunSession, TheLeaseGoesBackWhenTheWorkerDies) {
  GpuArbiter arbiter({0});
  GpuLease lease(arbiter, {0});
  FakeWorker worker;
  const RunRequest request = Request(LeaseMode::kShared, &lease);
  worker.Start(request);
  worker.Receive();
  worker.Ask(MessageType::kLeaseAcquire, MessageType::kLeaseGranted);
  worker.Ask(MessageType::kSpanBegin, MessageType::kSpanGranted);
  worker.Close();
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kCrashed);
  EXPECT_EQ(lease.depth(), 0);
  EXPECT_EQ(result.spans, 1);
}

TEST(RunSession, ReservedGpusGrantAtOnceAndDoNotGateSpans) {
  GpuArbiter arbiter({0});
  GpuLease lease(arbiter, {0});
  lease.Acquire("the reserved job");  // its caller holds the GPUs for the worker's life
  FakeWorker worker;
  const RunRequest request = Request(LeaseMode::kReserved, nullptr);
  worker.Start(request);
  worker.Receive();
  worker.Ask(MessageType::kLeaseAcquire, MessageType::kLeaseGranted);
  worker.Ask(MessageType::kSpanBegin, MessageType::kSpanGranted);
  worker.Send(ipc::Signal(MessageType::kSpanEnd));
  worker.Send(ipc::Signal(MessageType::kLeaseRelease));
  worker.Answer();
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kOutcome) << result.message;
  EXPECT_EQ(result.spans, 0);
  EXPECT_EQ(result.lease_wait_ms, 0.0);
  EXPECT_EQ(lease.HolderAt(NowNs()), "the reserved job");
  lease.Release();
}

TEST(RunSession, ACpuWorkerAskingForTheLeaseIsBroken) {
  FakeWorker worker;
  const RunRequest request = Request(LeaseMode::kNone, nullptr);
  worker.Start(request);
  worker.Receive();
  worker.Send(ipc::Signal(MessageType::kLeaseAcquire));
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kBroken);
  EXPECT_EQ(result.message, "worker sent an unexpected lease_acquire frame");
}

TEST(RunSession, AnUnknownWordIsQuotedInPart) {
  FakeWorker worker;
  const RunRequest request = Request(LeaseMode::kNone, nullptr);
  worker.Start(request);
  worker.Receive();
  worker.Send({{"type", std::string(100, 'x')}});
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kBroken);
  EXPECT_EQ(result.message, "worker sent an unexpected " + std::string(64, 'x') + " frame");
}

TEST(RunSession, TheDeadlineKillsTheWorker) {
  FakeWorker worker;
  RunRequest request = Request(LeaseMode::kNone, nullptr);
  request.timeout = 50ms;
  worker.Start(request);
  worker.Receive();
  RunResult result = worker.Finish();
  EXPECT_EQ(result.ending, RunResult::Ending::kTimedOut);
}

}  // namespace
}  // namespace kc::pool
