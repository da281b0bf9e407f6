#include "tls/client_context.h"

#include <exception>
#include <optional>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "tls/openssl_error.h"
#include "tls/tls_policy.h"

namespace kc::tls {

namespace {

StatusOr<boost::asio::ssl::context> NewClientContext() {
  std::optional<boost::asio::ssl::context> context;
  try {
    context.emplace(boost::asio::ssl::context::tls_client);
  } catch (const std::exception& error) {  // SSL_CTX_new failed: out of memory, broken OpenSSL
    return InternalError(std::string("cannot create a TLS context: ") + error.what());
  }
  KC_RETURN_IF_ERROR(ApplyTlsPolicy(*context));
  return std::move(*context);
}

}  // namespace

StatusOr<boost::asio::ssl::context> MakeClientContext(const std::string& ca_file) {
  KC_ASSIGN_OR_RETURN(boost::asio::ssl::context context, NewClientContext());
  SSL_CTX* ctx = context.native_handle();
  ::ERR_clear_error();  // what is reported below is ours alone
  // Only this file: not OpenSSL's default paths, so a public certificate does not pass.
  if (::SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
    return InvalidArgumentError("peer CA file '" + ca_file + "': " + TakeOpenSslError());
  }
  ::SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  return context;
}

StatusOr<boost::asio::ssl::context> MakeUnverifiedClientContext() {
  KC_ASSIGN_OR_RETURN(boost::asio::ssl::context context, NewClientContext());
  ::SSL_CTX_set_verify(context.native_handle(), SSL_VERIFY_NONE, nullptr);
  return context;
}

Status ExpectPeerName(ssl_st* ssl, const std::string& host) {
  X509_VERIFY_PARAM* param = ::SSL_get0_param(ssl);
  // An address is checked against the certificate's IP entries, a name against its DNS ones.
  if (::X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1) return Status::Ok();
  ::ERR_clear_error();  // not an address: the failed parse left a reason behind
  ::X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (::SSL_set1_host(ssl, host.c_str()) != 1 ||
      ::SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return InvalidArgumentError("cannot expect the TLS peer name '" + host +
                                "': " + TakeOpenSslError());
  }
  return Status::Ok();
}

}  // namespace kc::tls
