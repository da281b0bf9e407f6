#include "tls/server_context.h"

#include <exception>
#include <optional>

#include "tls/tls_policy.h"

namespace kc::tls {

StatusOr<boost::asio::ssl::context> MakeServerContext(const TlsIdentity& identity) {
  std::optional<boost::asio::ssl::context> context;
  try {
    context.emplace(boost::asio::ssl::context::tls_server);
  } catch (const std::exception& error) {  // SSL_CTX_new failed: out of memory, broken OpenSSL
    return InternalError(std::string("cannot create a TLS context: ") + error.what());
  }
  KC_RETURN_IF_ERROR(ApplyTlsPolicy(*context));
  KC_RETURN_IF_ERROR(LoadIdentity(*context, identity));
  return std::move(*context);
}

}  // namespace kc::tls
