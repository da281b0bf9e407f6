// TlsIdentity: the certificate chain and private key a TLS endpoint presents
// (the server's --tls-cert and --tls-key), and LoadIdentity, which puts them
// into a context.
#pragma once

#include <string>

#include <boost/asio/ssl/context.hpp>

#include "base/status.h"

namespace kc::tls {

struct TlsIdentity {
  std::string cert_file;  // PEM: the certificate, then any intermediates
  std::string key_file;   // PEM: its private key, not encrypted
};

// Loads both files and checks that the key belongs to the certificate. Fails
// closed: an unreadable, malformed or mismatched file is an error naming the
// file, with OpenSSL's reason. An encrypted key is refused (nothing could
// type its passphrase) rather than prompted for on the terminal.
Status LoadIdentity(boost::asio::ssl::context& context, const TlsIdentity& identity);

}  // namespace kc::tls
