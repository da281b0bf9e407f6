#include "cluster/http_endpoint.h"

namespace kc::cluster {

std::string HttpEndpoint::HostHeader() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + port;
}

StatusOr<HttpEndpoint> ParseHttpEndpoint(const std::string& url) {
  HttpEndpoint at;
  std::string rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
    at.port = "80";
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
    at.https = true;
    at.port = "443";
  } else {
    return InvalidArgumentError("URL " + url + ": not http:// or https://");
  }
  if (size_t slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  if (rest.starts_with('[')) {  // [v6 address]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos) return InvalidArgumentError("URL " + url + ": no ']'");
    at.host = rest.substr(1, close - 1);
    if (rest.size() > close + 2 && rest[close + 1] == ':') at.port = rest.substr(close + 2);
    return at;
  }
  const size_t colon = rest.rfind(':');
  at.host = rest.substr(0, colon);
  if (colon != std::string::npos) at.port = rest.substr(colon + 1);
  if (at.host.empty()) return InvalidArgumentError("URL " + url + ": no host");
  return at;
}

}  // namespace kc::cluster
