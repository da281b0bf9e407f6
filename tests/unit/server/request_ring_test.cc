#include "server/status/request_ring.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kc::server {
namespace {

RequestRecord Record(const std::string& id, const std::string& tenant = "") {
  RequestRecord record;
  record.request_id = id;
  record.tenant = tenant;
  return record;
}

// The ring's requests as the dashboard gets them, parsed.
std::vector<nlohmann::json> Parsed(const RequestRing& ring) {
  std::vector<nlohmann::json> out;
  for (const RenderedRequest& request : ring.Rendered())
    out.push_back(nlohmann::json::parse(*request.json));
  return out;
}

TEST(RequestRing, KeepsTheLastCapacityRequestsOldestFirst) {
  RequestRing ring;
  for (size_t i = 0; i < RequestRing::kCapacity + 5; ++i)
    ring.Finish(Record("r" + std::to_string(i)));
  const auto records = Parsed(ring);
  ASSERT_EQ(records.size(), RequestRing::kCapacity);
  EXPECT_EQ(records.front()["request_id"], "r5");
  EXPECT_EQ(records.back()["request_id"], "r" + std::to_string(RequestRing::kCapacity + 4));
  EXPECT_EQ(ring.finished(), RequestRing::kCapacity + 5);
}

TEST(RequestRing, FinishJoinsTheNotedRun) {
  RequestRing ring;
  RunNote note;
  note.worker_id = "cpu/w0";
  note.lease_held_ms = 12;
  note.span_held_ms = 5;
  note.timeline = {{.index = 0, .op = "upload", .ms = 1.5004}};
  ring.NoteRun("a", note);
  ring.Finish(Record("a", "alice"));
  ring.Finish(Record("b"));  // no note: it ran nowhere here
  const auto records = Parsed(ring);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["worker_id"], "cpu/w0");
  EXPECT_EQ(records[0]["lease_held_ms"], 12);
  EXPECT_EQ(records[0]["span_held_ms"], 5);
  // Each step an array in the order of kTimelineFields, times to the microsecond.
  EXPECT_EQ(records[0]["timeline"], nlohmann::json::parse(R"([[0, "upload", "", 1.5, 0, false]])"));
  EXPECT_EQ(ring.Rendered()[0].tenant, "alice");
  // What is empty is left out.
  EXPECT_EQ(records[1], nlohmann::json::parse(R"({"request_id": "b", "finished_unix_ms": 0,
      "http_status": 0, "finish_reason": "", "total_ms": 0})"));
}

TEST(RequestRing, RendersEachRequestOnceForEveryBuild) {
  RequestRing ring;
  ring.Finish(Record("a"));
  const auto first = ring.Rendered();
  ring.Finish(Record("b"));
  const auto second = ring.Rendered();
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].json.get(), first[0].json.get());  // the same text, not rendered again
}

TEST(RequestRing, CutsLongErrorMessages) {
  RequestRing ring;
  RequestRecord record = Record("a");
  record.error_message = std::string(5000, 'x');
  ring.Finish(record);
  EXPECT_EQ(Parsed(ring)[0]["error_message"].get<std::string>().size(), RequestRing::kMessageChars);
}

TEST(RequestRing, CountsRequestsInFlightByTenant) {
  RequestRing ring;
  ring.Begin("alice");
  ring.Begin("alice");
  ring.Begin("bob");
  EXPECT_EQ(ring.InFlightByTenant(), (std::map<std::string, int>{{"alice", 2}, {"bob", 1}}));
  ring.Finish(Record("1", "alice"));
  ring.Finish(Record("2", "bob"));
  EXPECT_EQ(ring.InFlightByTenant(), (std::map<std::string, int>{{"alice", 1}}));
}

TEST(RequestRing, ForgetsNotesOfRequestsThatNeverFinishHere) {
  RequestRing ring;
  for (size_t i = 0; i < RequestRing::kPendingNotes + 10; ++i) {
    RunNote note;
    note.lease_held_ms = 1;
    ring.NoteRun("n" + std::to_string(i), note);
  }
  ring.Finish(Record("n0"));  // its note, the oldest, went
  ring.Finish(Record("n" + std::to_string(RequestRing::kPendingNotes + 9)));
  EXPECT_FALSE(Parsed(ring)[0].contains("lease_held_ms"));
  EXPECT_EQ(Parsed(ring)[1]["lease_held_ms"], 1);
}

}  // namespace
}  // namespace kc::server
