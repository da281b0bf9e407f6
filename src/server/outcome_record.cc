#include "server/outcome_record.h"

#include <openssl/evp.h>

#include "store/blob_builder.h"

namespace kc::server {

namespace {

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

StatusOr<std::string> FromBase64(std::string_view text) {
  if (text.size() % 4 != 0) return InvalidArgumentError("outcome body: malformed base64");
  std::string out(3 * (text.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return InvalidArgumentError("outcome body: malformed base64");
  // EVP_DecodeBlock counts the padding's zero bytes: drop one per '='.
  size_t pad = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i)
    ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::vector<std::string_view> PiecesOf(const HttpReply& reply) {
  if (reply.pieces == nullptr) return {reply.body};
  return reply.pieces->encoded.pieces;
}

}  // namespace

StatusOr<OutcomeRecord> RecordOf(const HttpReply& reply, const std::string& executed_by) {
  OutcomeRecord out;
  nlohmann::json& r = out.record;
  r["status"] = reply.status;
  r["content_type"] = reply.content_type;
  r["retry_after"] = reply.retry_after;
  r["headers"] = reply.headers;
  r["ending"] = reply.ending ? static_cast<int>(*reply.ending) : -1;
  r["error_kind"] = reply.error_kind;
  r["error_message"] = reply.error_message;
  r["executed_by"] = executed_by;
  if (reply.body_size() <= kInlineBodyBytes) {
    std::string body;
    for (std::string_view piece : PiecesOf(reply))
      body.append(piece);
    r["body_base64"] = Base64(body);
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
  r["body_sha256"] = std::move(sha256);
  r["body_bytes"] = reply.body_size();
  return out;
}

StatusOr<HttpReply> ReplyOf(const nlohmann::json& record, const store::BlobPtr& body,
                            const std::string& request_id) {
  if (!record.is_object() || !record.contains("status")) {
    return InternalError("a stored outcome without a status");
  }
  HttpReply reply;
  reply.status = record.value("status", 500);
  reply.content_type = record.value("content_type", "application/json");
  reply.request_id = request_id;
  reply.retry_after = record.value("retry_after", false);
  reply.headers = record.value("headers", decltype(reply.headers){});
  if (const int ending = record.value("ending", -1); ending >= 0) {
    reply.ending = static_cast<RequestEnding>(ending);
  }
  reply.error_kind = record.value("error_kind", "");
  reply.error_message = record.value("error_message", "");
  // Which node ran it: for operators and tests; clients may ignore it.
  reply.headers.emplace_back("X-KCoral-Executed-By", record.value("executed_by", ""));
  if (record.contains("body_base64")) {
    KC_ASSIGN_OR_RETURN(reply.body, FromBase64(record.value("body_base64", "")));
  } else {
    if (body == nullptr) return InternalError("a stored outcome's body blob is missing");
    KC_ASSIGN_OR_RETURN(reply.pieces, MappedBody(body->fd()));
  }
  return reply;
}

}  // namespace kc::server
