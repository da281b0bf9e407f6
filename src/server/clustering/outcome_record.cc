#include "server/clustering/outcome_record.h"

#include "store/blob_builder.h"

namespace kc::server {

namespace {

std::vector<std::string_view> PiecesOf(const HttpReply& reply) {
  if (reply.pieces == nullptr) return {reply.body};
  return reply.pieces->encoded.pieces;
}

}  // namespace

StatusOr<RecordedReply> RecordOf(const HttpReply& reply, const std::string& executed_by) {
  RecordedReply out;
  cluster::OutcomeRecord& r = out.record;
  r.status = reply.status;
  r.content_type = reply.content_type;
  r.retry_after = reply.retry_after;
  r.headers = reply.headers;
  r.ending = reply.ending ? static_cast<int>(*reply.ending) : -1;
  r.error_kind = reply.error_kind;
  r.error_message = reply.error_message;
  r.executed_by = executed_by;
  if (reply.body_size() <= kInlineBodyBytes) {
    std::string body;
    for (std::string_view piece : PiecesOf(reply))
      body.append(piece);
    r.body = std::move(body);
    return out;
  }
  // A large body (results of hundreds of MiB) goes from its pieces into the blob: never joined.
  store::BlobBuilder builder;
  for (std::string_view piece : PiecesOf(reply)) {
    builder.Hash(piece);
    KC_RETURN_IF_ERROR(builder.Write(piece));
  }
  std::string sha256 = builder.Digest();
  KC_ASSIGN_OR_RETURN(out.body, builder.Seal(sha256));
  r.body_blob = cluster::OutcomeBlob{std::move(sha256), reply.body_size(), {}};
  return out;
}

StatusOr<HttpReply> ReplyOf(cluster::OutcomeRecord record, const store::BlobPtr& body,
                            const std::string& request_id) {
  HttpReply reply;
  reply.status = record.status;
  reply.content_type = std::move(record.content_type);
  reply.request_id = request_id;
  reply.retry_after = record.retry_after;
  reply.headers = std::move(record.headers);
  if (record.ending >= 0) reply.ending = static_cast<RequestEnding>(record.ending);
  reply.error_kind = std::move(record.error_kind);
  reply.error_message = std::move(record.error_message);
  // Which node ran it: for operators and tests; clients may ignore it.
  reply.headers.emplace_back("X-KCoral-Executed-By", record.executed_by);
  if (record.body) {
    reply.body = std::move(*record.body);
  } else {
    if (body == nullptr) return InternalError("a stored outcome's body blob is missing");
    KC_ASSIGN_OR_RETURN(reply.pieces, MappedBody(body->fd()));
  }
  return reply;
}

}  // namespace kc::server
