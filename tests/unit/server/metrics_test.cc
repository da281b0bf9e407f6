#include "server/status/metrics.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kc::server {
namespace {

struct RecordingSink : pool::EventSink {
  void Emit(EventLevel, std::string_view event, nlohmann::json fields) override {
    events.push_back(std::string(event) + " " + fields.dump());
  }
  std::vector<std::string> events;
};

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(Metrics, CountsRequestsByStatusAndReason) {
  RecordingSink sink;
  Metrics metrics(sink);
  metrics.RecordRequest(200, "completed", 3);
  metrics.RecordRequest(200, "completed", 40);
  metrics.RecordRequest(400, "rejected", 1);
  const std::string text = metrics.Render({}, false);
  EXPECT_TRUE(Has(text, R"(kcoral_requests_total{code="200",finish_reason="completed"} 2)"))
      << text;
  EXPECT_TRUE(Has(text, R"(kcoral_requests_total{code="400",finish_reason="rejected"} 1)")) << text;
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  RecordingSink sink;
  Metrics metrics(sink);
  metrics.RecordRequest(200, "completed", 3);    // 0.003 s: the first bucket
  metrics.RecordRequest(200, "completed", 40);   // 0.04 s: le=0.05
  metrics.RecordRequest(200, "completed", 7e5);  // 700 s: past every bucket
  const std::string text = metrics.Render({}, false);
  EXPECT_TRUE(Has(text, R"(kcoral_request_duration_seconds_bucket{le="0.005"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(kcoral_request_duration_seconds_bucket{le="0.025"} 1)")) << text;
  EXPECT_TRUE(Has(text, R"(kcoral_request_duration_seconds_bucket{le="0.05"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(kcoral_request_duration_seconds_bucket{le="600"} 2)")) << text;
  EXPECT_TRUE(Has(text, R"(kcoral_request_duration_seconds_bucket{le="+Inf"} 3)")) << text;
  EXPECT_TRUE(Has(text, "kcoral_request_duration_seconds_count 3")) << text;
  EXPECT_TRUE(Has(text, "kcoral_request_duration_seconds_sum 700.043")) << text;
}

TEST(Metrics, RunsAddQueueWaitAndLeaseTime) {
  RecordingSink sink;
  Metrics metrics(sink);
  pool::JobResult result;
  result.queue_ms = 20;
  result.run.lease_wait_ms = 1500;
  result.run.lease_held_ms = 250;
  result.run.span_wait_ms = 100;
  metrics.RecordRun(result);
  metrics.RecordRun(result);
  const std::string text = metrics.Render({}, false);
  EXPECT_TRUE(Has(text, R"(kcoral_queue_wait_seconds_bucket{le="0.025"} 2)")) << text;
  EXPECT_TRUE(Has(text, "kcoral_lease_wait_seconds_total 3")) << text;
  EXPECT_TRUE(Has(text, "kcoral_lease_held_seconds_total 0.5")) << text;
  EXPECT_TRUE(Has(text, "kcoral_span_wait_seconds_total 0.2")) << text;
}

TEST(Metrics, WorkerEventsAreCountedAndForwardedUnchanged) {
  RecordingSink sink;
  Metrics metrics(sink);
  metrics.Emit(EventLevel::kInfo, "worker_retired", {{"reason", "timeout"}});
  metrics.Emit(EventLevel::kInfo, "worker_retired", {{"reason", "timeout"}});
  metrics.Emit(EventLevel::kError, "worker_failed", {{"phase", "startup"}});
  metrics.Emit(EventLevel::kInfo, "request_routed", {{"pid", 7}});
  const std::string text = metrics.Render({}, false);
  EXPECT_TRUE(Has(text, R"(kcoral_worker_events_total{event="worker_retired",reason="timeout"} 2)"))
      << text;
  EXPECT_TRUE(Has(text, R"(kcoral_worker_events_total{event="worker_failed",reason="startup"} 1)"))
      << text;
  EXPECT_EQ(text.find("request_routed"), std::string::npos);
  ASSERT_EQ(sink.events.size(), 4u);
  EXPECT_EQ(sink.events[3], R"(request_routed {"pid":7})");
}

TEST(Metrics, GaugesShowTheLoadGiven) {
  RecordingSink sink;
  Metrics metrics(sink);
  pool::PoolLoad load;
  load.request_capacity = 8;
  load.requests_in_progress = 3;
  load.requests_waiting = 11;
  const std::string text = metrics.Render(load, true);
  EXPECT_TRUE(Has(text, "kcoral_request_capacity 8")) << text;
  EXPECT_TRUE(Has(text, "kcoral_requests_in_progress 3")) << text;
  EXPECT_TRUE(Has(text, "kcoral_requests_waiting 11")) << text;
  EXPECT_TRUE(Has(text, "kcoral_shutting_down 1")) << text;
}

TEST(Metrics, EveryFamilyHasHelpAndType) {
  RecordingSink sink;
  Metrics metrics(sink);
  const std::string text = metrics.Render({}, false);
  for (const char* family :
       {"kcoral_requests_total", "kcoral_request_duration_seconds", "kcoral_queue_wait_seconds",
        "kcoral_lease_wait_seconds_total", "kcoral_lease_held_seconds_total",
        "kcoral_span_wait_seconds_total", "kcoral_worker_events_total", "kcoral_request_capacity",
        "kcoral_requests_in_progress", "kcoral_requests_waiting", "kcoral_shutting_down"}) {
    EXPECT_NE(text.find(std::string("# HELP ") + family + " "), std::string::npos) << family;
    EXPECT_NE(text.find(std::string("# TYPE ") + family + " "), std::string::npos) << family;
  }
}

}  // namespace
}  // namespace kc::server
