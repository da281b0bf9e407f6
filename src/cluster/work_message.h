// WorkMessage: one request queued for a pool (docs/cluster.md "The work message"), as the entry
// node publishes it on kcoral.work.<pool>.<tenant> (cluster_entry.cc) and the executing node
// reads it (cluster_executor.cc). Its wire form is a JSON object of 14 keys at most, one per
// field below under the field's name, in the order of their names (nlohmann::json's objects
// are sorted), with the optional ones left out when empty. Nodes of two versions share a
// cluster during a rolling upgrade, so that form is pinned byte for byte by
// tests/unit/cluster/work_message_test.cc: a change there is a change of the cluster's wire.
//
// Pure: no I/O, no clock (the entry node sets the times).
//
//   WorkMessage message{.key = key, .request_id = request_id, ...};
//   queue->Publish(pool, TenantSubjectToken(message.tenant), id, message.Encode());
//   ...
//   KC_ASSIGN_OR_RETURN(WorkMessage message, WorkMessage::Decode(item.data()));
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kc::cluster {

// The tenant of requests sent without an API key (server/access_keys.h): "" in this message, in
// quotas and in the event log. Its subject token is TenantSubjectToken's.
inline constexpr std::string_view kAnonymousTenant = "";

// `tenant`'s token in the work queue's subjects and consumer names (kcoral.work.<pool>.<tenant>,
// work_queue.h): its own name, which access_keys.cc keeps subject-safe, or "anonymous" for
// kAnonymousTenant (an empty token is no subject).
std::string TenantSubjectToken(std::string_view tenant);

// Programs larger than this travel as a blob, by hash (`program_sha256`), not in the message:
// the broker carries programs and hashes, never blob bytes, and refuses messages over 1 MB.
inline constexpr size_t kInlineProgramBytes = size_t{512} << 10;

struct WorkMessage {
  // The request's name across nodes (cluster_entry.cc ClusterKey): the claim's, the outcome's
  // and the cancel subject's key. Never empty.
  std::string key;
  std::string request_id;  // the entry node's X-Request-ID, for the event log
  std::string entry_node;  // the entry node's node id
  // The entry node's --node-url: blobs the executing node lacks are fetched from it first, and
  // a large reply body is pushed to it.
  std::string entry_url;
  // When the request's timeout runs out: a node that pulls it later answers `timeout` unrun.
  int64_t deadline_unix_ms = 0;
  double timeout_seconds = 0;
  int64_t output_limit_bytes = 0;
  std::string tenant{kAnonymousTenant};  // whose request: its quotas and fair share
  double weight = 1;                     // the tenant's weight in fair shares
  // With an Idempotency-Key: the nonce of the run this message is (cluster_types.h Claim).
  // The executing node runs it only when the key's claim carries it.
  std::optional<std::string> claim;
  // Queued again, by a client's retry with the key (cluster_entry.cc ClaimAndQueue) or by the
  // entry node's own later try while NATS was away (ClusterEntry::Queue): the first run may
  // have stored its outcome, or still hold the key, whatever the delivery count says. JetStream
  // drops it as a duplicate only while it remembers the first message's id, and a restarted
  // server rebuilds that memory from the messages still stored: an acknowledged one is gone
  // from a work queue, and its id forgotten (nats-server issue 3272). Written only when true.
  bool retry = false;
  // When the entry node queued it, for the executing node's transit time. Always written;
  // optional for messages of nodes older than 8600778.
  std::optional<int64_t> queued_unix_us;
  // Exactly one of the two: the program's JSON, up to kInlineProgramBytes, or the SHA-256 of the
  // blob that holds it (in the entry node's store).
  std::optional<std::string> program;
  std::optional<std::string> program_sha256;

  // The wire form (above). Text that is not UTF-8 is replaced (U+FFFD), never thrown.
  std::string Encode() const;
  // A message of this form. A message that is not a JSON object, a missing or mistyped field,
  // an empty key, or both or neither of `program` and `program_sha256` is kInternal naming the
  // field. Keys it does not know are ignored (a newer node's additions).
  static StatusOr<WorkMessage> Decode(std::string_view text);
};

}  // namespace kc::cluster
