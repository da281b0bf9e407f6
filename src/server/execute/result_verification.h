// Verification of sealed benchmark results (docs/benchmark-integrity.md "Sealed results").
//
// The worker's timers return a dict whose integrity holds `record` (the whole result in the wire
// value encoding, as compact JSON) and `seal` (hex HMAC-SHA256 of the record under the worker's
// key, which the worker sent in its ready frame, ipc/frame.h). User code in the worker can edit
// that dict or make one of its own, but cannot make a seal. VerifySealedResults walks every
// returned value tree; each object node with an "integrity" member ends as one of:
//   - verified: integrity is an object with string record and seal, the seal is the record's
//     MAC under this worker's key (constant-time compare), the record reads as a value tree and
//     its integrity.request_id is this request's id. The node is replaced by the record, whose
//     integrity.flags and .conditions gain the server's (SealCheck), and which gains
//     verified: true, trusted: (no flags, no unchecked output), altered_after_timing: (the
//     returned node, less record/seal/verified, differs from the record) and provenance:
//     {instruction_id, uploads: {upload id: sha256 of its blob or module source}}, taken from
//     the server's own view of the program. record and seal do not reach the client.
//   - not verified: integrity.verified: false, trusted: false, reason: one sentence saying why
//     (no seal, bad seal, another request's record, unreadable record); the rest stays as
//     returned, less the members only the server writes (altered_after_timing, provenance).
// So no object a program makes reaches the client with integrity.verified true.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "protocol/json_value.h"
#include "protocol/program.h"

namespace kc::server {

struct SealCheck {
  std::string_view request_id;
  std::string_view seal_key;  // 32 raw bytes; empty: no seal verifies
  const protocol::Program* program;
  // The server's own findings about the request's timing spans (pool/gpu_census.h), added to
  // every verified record's integrity.conditions (never flags: they are the machine's doing).
  std::vector<std::string> conditions = {};
};

// False when `outcome_json` cannot hold an object key "integrity": the word is absent and so is
// any \u escape that could spell it. Lets the common answer skip the walk.
bool MayHoldIntegrity(std::string_view outcome_json);

// How the records of one outcome fared, for the dashboard's integrity verdict (issue 28).
struct SealTally {
  int trusted = 0;     // verified, no flags, nothing unchecked
  int flagged = 0;     // verified, with flags or unchecked outputs
  int unverified = 0;  // refused
  // "unverified" if any was refused, else "flagged" if any has flags, else "trusted"; empty
  // when the outcome held no record.
  std::string Verdict() const;
};

// `results`: the outcome's results object (key -> wire value node, after FinalizeResults),
// rewritten in place.
SealTally VerifySealedResults(protocol::JsonValue& results, const SealCheck& check);

}  // namespace kc::server
