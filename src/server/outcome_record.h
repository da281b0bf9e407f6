// OutcomeRecord: an /execute reply as the cluster keeps it (docs/cluster.md "One answer"): the
// HTTP status, headers and ending as JSON, and the body either inline (base64, small replies)
// or as a blob named by its SHA-256 that the executing node pushed to the entry node and keeps
// itself (`holders`: where to fetch it from). The outcome store holds records of at most
// kInlineBodyBytes * 4/3 plus a little: well under the broker's 1 MB.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "server/http_reply.h"
#include "store/blob.h"

namespace kc::server {

inline constexpr size_t kInlineBodyBytes = size_t{256} << 10;

struct OutcomeRecord {
  nlohmann::json record;
  store::BlobPtr body;  // set when the body is too large to be inline
};

// The record of `reply`. `executed_by`: the node id that ran it.
StatusOr<OutcomeRecord> RecordOf(const HttpReply& reply, const std::string& executed_by);

// The reply a record stands for, answered under `request_id`. `body`: the blob named by the
// record's body_sha256, when it has one (null otherwise); the reply is written from its mapping.
StatusOr<HttpReply> ReplyOf(const nlohmann::json& record, const store::BlobPtr& body,
                            const std::string& request_id);

}  // namespace kc::server
