#include "tls/tls_policy.h"

#include <openssl/ssl.h>

#include "tls/openssl_error.h"

namespace kc::tls {

Status ApplyTlsPolicy(boost::asio::ssl::context& context) {
  SSL_CTX* ctx = context.native_handle();
  if (::SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    return InternalError("cannot require TLS 1.2: " + TakeOpenSslError());
  }
  if (::SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return InternalError("cannot set the TLS 1.2 ciphers: " + TakeOpenSslError());
  }
  // The server's order of ciphers wins: ours lists the fastest with AES-NI first.
  ::SSL_CTX_set_options(
      ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  return Status::Ok();
}

}  // namespace kc::tls
