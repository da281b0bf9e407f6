// OutcomeRecord: a request's answer as the cluster keeps it (docs/cluster.md "One answer"): put
// in the outcomes bucket by the executing node (outcome_store.h), announced on
// kcoral.outcome.<key>, and answered from by the entry node. It holds the HTTP reply's status,
// headers and ending, and its body either inline (small replies) or as a blob named by its
// SHA-256 that the executing node keeps and pushed to the entry node. server/outcome_record.h
// turns replies into records and back.
//
// Its wire form is a JSON object, one key per field under the field's name, in the order of
// their names (nlohmann::json's objects are sorted); the inline body is `body_base64`, the
// blob `body_sha256`, `body_bytes` and `holders`. Nodes of two versions share a cluster during
// a rolling upgrade, so that form is pinned byte for byte by
// tests/unit/cluster/outcome_record_test.cc.
//
// Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kc::cluster {

// A body too large to be inline: a blob in the executing node's store.
struct OutcomeBlob {
  std::string sha256;
  uint64_t bytes = 0;
  // The node URLs to fetch it from, the entry node's first when the push to it succeeded.
  std::vector<std::string> holders;
};

struct OutcomeRecord {
  int status = 500;  // HTTP
  std::string content_type;
  bool retry_after = false;
  std::vector<std::pair<std::string, std::string>> headers;
  // How the request ended: a server::RequestEnding's value, -1 for none.
  int ending = -1;
  std::string error_kind;
  std::string error_message;
  std::string executed_by;  // the node id that ran it
  // Exactly one of the two.
  std::optional<std::string> body;  // the bytes themselves (base64 on the wire)
  std::optional<OutcomeBlob> body_blob;

  // The wire form (above). Text that is not UTF-8 is replaced (U+FFFD), never thrown.
  std::string Encode() const;
  // A record of this form. One that is not a JSON object, a missing or mistyped field,
  // malformed base64, or both or neither of the two bodies is kInternal naming the field.
  static StatusOr<OutcomeRecord> Decode(std::string_view text);
};

}  // namespace kc::cluster
