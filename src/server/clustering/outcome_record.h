// RecordOf and ReplyOf: an /execute reply as the cluster keeps it (docs/cluster.md "One answer")
// and back: a cluster::OutcomeRecord (cluster/outcome_record.h, its wire form) with the HTTP
// status, headers and ending, and the body either inline (small replies) or as a blob named by
// its SHA-256 that the executing node pushes to the entry node and keeps itself. The outcome
// store holds records of at most kInlineBodyBytes * 4/3 plus a little: well under the broker's
// 1 MB.
#pragma once

#include <string>

#include "base/status.h"
#include "cluster/outcome_record.h"
#include "server/core/http_reply.h"
#include "store/blob.h"

namespace kc::server {

inline constexpr size_t kInlineBodyBytes = size_t{256} << 10;

struct RecordedReply {
  cluster::OutcomeRecord record;
  // The blob that record.body_blob names, when the body is too large to be inline; its holders
  // are the executing node's to fill in.
  store::BlobPtr body;
};

// The record of `reply`. `executed_by`: the node id that ran it.
StatusOr<RecordedReply> RecordOf(const HttpReply& reply, const std::string& executed_by);

// The reply a record stands for, answered under `request_id`. `body`: the blob named by the
// record's body_blob, when it has one (null otherwise); the reply is written from its mapping.
StatusOr<HttpReply> ReplyOf(cluster::OutcomeRecord record, const store::BlobPtr& body,
                            const std::string& request_id);

}  // namespace kc::server
