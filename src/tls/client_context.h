// The client side of KCoral's TLS (issue 26 item 7: where a server has TLS on, traffic between
// the nodes of a cluster is TLS too): MakeClientContext, the context a node's client to its
// peers shares (ApplyTlsPolicy's settings, and the CA it checks them against), and
// ExpectPeerName, which each connection is given before its handshake.
//
// Usage:
//   KC_ASSIGN_OR_RETURN(ssl::context context, MakeClientContext("/etc/kcoral/peer-ca.pem"));
//   beast::ssl_stream<beast::tcp_stream> stream(io, context);
//   KC_RETURN_IF_ERROR(ExpectPeerName(stream.native_handle(), "gpu-7.example"));
//   ... connect, handshake (fails unless the certificate chains to the CA and names the host)
//
// Thread-safe once made: connections on any thread may use one context at once.
#pragma once

#include <string>

#include <boost/asio/ssl/context.hpp>

#include "base/status.h"

struct ssl_st;  // OpenSSL's SSL

namespace kc::tls {

// A client context that trusts only the PEM certificates in `ca_file` (a bundle may hold
// several) and refuses any peer whose chain does not end in one of them. Fails closed: a
// missing, unreadable or certificate-less file is an error naming it.
StatusOr<boost::asio::ssl::context> MakeClientContext(const std::string& ca_file);

// A client context that encrypts but checks no certificate: anyone on the path can pose as
// the peer. Only for an operator who turned the check off on purpose.
StatusOr<boost::asio::ssl::context> MakeUnverifiedClientContext();

// Before the handshake of one connection to `host` (a DNS name, or an IPv4/IPv6 address as
// in a URL, brackets removed): sends the name as SNI (names only: RFC 6066 forbids
// addresses there) and makes the handshake fail unless the certificate names `host` in its
// subjectAltName (a DNS or IP entry). Has no effect on what an unverified context accepts.
Status ExpectPeerName(ssl_st* ssl, const std::string& host);

}  // namespace kc::tls
