// Test-only: a TLS handshake between two SSL_CTXs over an in-memory BIO pair,
// driven by turns on the calling thread (no socket, no event loop), to see
// what a context's policy accepts and refuses.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <openssl/ssl.h>

#include "tls/openssl_error.h"

namespace kc::testing {

struct HandshakeResult {
  bool ok = false;
  std::string server_error;  // why the server gave up (OpenSSL's reason), if it did
  std::string client_error;
  std::string version;  // negotiated: "TLSv1.3", ...
  std::string cipher;
};

// `prepare_client`, if given, sees the client's SSL before the handshake (a host name to expect).
inline HandshakeResult Handshake(SSL_CTX* server_ctx, SSL_CTX* client_ctx,
                                 const std::function<void(SSL*)>& prepare_client = {}) {
  std::unique_ptr<SSL, decltype(&SSL_free)> server(SSL_new(server_ctx), SSL_free);
  std::unique_ptr<SSL, decltype(&SSL_free)> client(SSL_new(client_ctx), SSL_free);
  if (prepare_client) prepare_client(client.get());
  BIO* client_end = nullptr;
  BIO* server_end = nullptr;
  BIO_new_bio_pair(&client_end, 0, &server_end, 0);
  SSL_set_bio(client.get(), client_end, client_end);  // each SSL owns its end
  SSL_set_bio(server.get(), server_end, server_end);
  SSL_set_connect_state(client.get());
  SSL_set_accept_state(server.get());
  HandshakeResult result;
  // Each turn moves the handshake one flight on; a few suffice for TLS 1.2 and 1.3.
  for (int turn = 0; turn < 16; ++turn) {
    const int client_done = SSL_do_handshake(client.get());
    if (client_done != 1) {
      const int error = SSL_get_error(client.get(), client_done);
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        result.client_error = tls::TakeOpenSslError();
      }
    }
    const int server_done = SSL_do_handshake(server.get());
    if (server_done != 1) {
      const int error = SSL_get_error(server.get(), server_done);
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        result.server_error = tls::TakeOpenSslError();
      }
    }
    if (client_done == 1 && server_done == 1) {
      result.ok = true;
      result.version = SSL_get_version(server.get());
      result.cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(server.get()));
      return result;
    }
    if (!result.server_error.empty() || !result.client_error.empty()) return result;
  }
  result.server_error = "handshake did not finish";
  return result;
}

// A client context that offers exactly the protocol versions and TLS 1.2 ciphers given, at
// security level 0 so that OpenSSL's own client defaults refuse nothing first.
inline std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ClientContext(
    int min_version, int max_version, const char* tls12_ciphers = "DEFAULT:@SECLEVEL=0") {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        SSL_CTX_free);
  SSL_CTX_set_security_level(ctx.get(), 0);
  SSL_CTX_set_min_proto_version(ctx.get(), min_version);
  SSL_CTX_set_max_proto_version(ctx.get(), max_version);
  SSL_CTX_set_cipher_list(ctx.get(), tls12_ciphers);
  return ctx;
}

}  // namespace kc::testing
