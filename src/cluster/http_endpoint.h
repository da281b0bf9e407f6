// HttpEndpoint: where an "http://host:port" or "https://host:port" URL points (a node's URL in
// the registry, a broker's monitoring port), for a Beast client to resolve and connect to.
#pragma once

#include <string>

#include "base/status.h"

namespace kc::cluster {

struct HttpEndpoint {
  bool https = false;
  std::string host;  // a name or an address, without an IPv6 address's brackets
  std::string port;  // the scheme's default when the URL names none
  // "host:port" as the Host header carries it (an IPv6 address in brackets).
  std::string HostHeader() const;
};

// The scheme, host and port of `url`; a path after them is ignored.
StatusOr<HttpEndpoint> ParseHttpEndpoint(const std::string& url);

}  // namespace kc::cluster
