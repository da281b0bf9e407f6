#include "server/core/http_reply.h"

#include "base/shared_bytes.h"
#include "protocol/json_writer.h"

namespace kc::server {

StatusOr<std::shared_ptr<PiecesBody>> MappedBody(int sealed_memfd) {
  KC_ASSIGN_OR_RETURN(SharedBytes mapped, SharedBytes::MapSealedMemfd(sealed_memfd));
  auto body = std::make_shared<PiecesBody>();
  body->keep = mapped.keeper();
  body->encoded.pieces = {mapped.view()};
  return body;
}

HttpReply EndingReply(RequestEnding ending, std::string_view message,
                      const std::string& request_id) {
  const EndingTraits traits = TraitsOf(ending);
  std::string body;
  protocol::JsonWriter(body)
      .BeginObject()
      .Key("status")
      .String("ERROR")
      .Key("request_id")
      .String(request_id)
      .Key("error")
      .BeginObject()
      .Key("kind")
      .String(traits.error_kind)
      .Key("message")
      .String(message)
      .EndObject()
      .EndObject();
  HttpReply reply = BodyReply(ending, "application/json", std::move(body), request_id);
  reply.error_message = message;
  return reply;
}

HttpReply BodyReply(RequestEnding ending, std::string content_type, std::string body,
                    const std::string& request_id) {
  const EndingTraits traits = TraitsOf(ending);
  HttpReply reply{traits.http_status, std::move(content_type), std::move(body), request_id};
  reply.retry_after = traits.retry_after;
  reply.ending = ending;
  reply.error_kind = traits.error_kind;
  return reply;
}

}  // namespace kc::server
