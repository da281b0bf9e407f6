#include "tls/identity.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls/openssl_error.h"

namespace kc::tls {

namespace {

// OpenSSL's default asks on the terminal; a server has nobody there.
int NoPassphrase(char*, int, int, void*) {
  return 0;
}

Status KeyNotOfCertificate(const TlsIdentity& identity) {
  return InvalidArgumentError("TLS key file '" + identity.key_file +
                              "' does not belong to the certificate in '" + identity.cert_file +
                              "': " + TakeOpenSslError());
}

}  // namespace

Status LoadIdentity(boost::asio::ssl::context& context, const TlsIdentity& identity) {
  SSL_CTX* ctx = context.native_handle();
  ::SSL_CTX_set_default_passwd_cb(ctx, NoPassphrase);
  ::ERR_clear_error();  // what is reported below is ours alone
  if (::SSL_CTX_use_certificate_chain_file(ctx, identity.cert_file.c_str()) != 1) {
    return InvalidArgumentError("TLS certificate file '" + identity.cert_file +
                                "': " + TakeOpenSslError());
  }
  if (::SSL_CTX_use_PrivateKey_file(ctx, identity.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    // The key is checked against the certificate as it is loaded.
    const unsigned long error = ::ERR_peek_error();
    if (ERR_GET_LIB(error) == ERR_LIB_X509 && ERR_GET_REASON(error) == X509_R_KEY_VALUES_MISMATCH) {
      return KeyNotOfCertificate(identity);
    }
    return InvalidArgumentError("TLS key file '" + identity.key_file + "': " + TakeOpenSslError());
  }
  if (::SSL_CTX_check_private_key(ctx) != 1) return KeyNotOfCertificate(identity);
  return Status::Ok();
}

}  // namespace kc::tls
