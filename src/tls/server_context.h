// MakeServerContext: the TLS context every HTTPS connection of a server
// shares (issue 27): ApplyTlsPolicy's settings and the server's identity.
//
// Thread-safe once made: connections on any thread may use it at once. The
// server keeps it for as long as it serves.
#pragma once

#include <boost/asio/ssl/context.hpp>

#include "base/status.h"
#include "tls/identity.h"

namespace kc::tls {

StatusOr<boost::asio::ssl::context> MakeServerContext(const TlsIdentity& identity);

}  // namespace kc::tls
