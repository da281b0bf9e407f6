// ApplyTlsPolicy: the protocol settings of every KCoral TLS context, the
// server's (server_context.h) and a node's client to its peers
// (client_context.h; issue 26: where a server has TLS on, traffic between
// nodes is TLS too), so both ends agree by construction.
//
// - TLS 1.2 or later: 1.0 and 1.1 lack AEAD ciphers and are deprecated (RFC 8996).
// - TLS 1.2 ciphers: forward-secret ECDHE with AEAD only (Mozilla's
//   "intermediate" list less DHE, which needs parameters we do not ship).
//   TLS 1.3's suites are all AEAD: OpenSSL's defaults are kept.
// - No compression (CRIME), no renegotiation (a client could make the server
//   redo handshakes at will; TLS 1.3 has none anyway).
#pragma once

#include <boost/asio/ssl/context.hpp>

#include "base/status.h"

namespace kc::tls {

inline constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

Status ApplyTlsPolicy(boost::asio::ssl::context& context);

}  // namespace kc::tls
