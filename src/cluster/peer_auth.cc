#include "cluster/peer_auth.h"

#include <charconv>

#include "base/hmac_sha256.h"
#include "base/utc_time.h"

namespace kc::cluster {

namespace {

std::string Mac(std::string_view secret, std::string_view time, std::string_view method,
                std::string_view target) {
  std::string message;
  message.append(time).append("\n").append(method).append("\n").append(target);
  return HmacSha256Hex(secret, message);
}

}  // namespace

int64_t UnixSecondsNow() {
  return UnixMillisecondsNow() / 1000;
}

std::string SignPeerRequest(std::string_view secret, std::string_view method,
                            std::string_view target, int64_t unix_seconds) {
  const std::string time = std::to_string(unix_seconds);
  return time + "." + Mac(secret, time, method, target);
}

Status CheckPeerRequest(std::string_view secret, std::string_view header, std::string_view method,
                        std::string_view target, int64_t unix_seconds) {
  if (header.empty()) return PermissionDeniedError("a cluster route needs X-KCoral-Peer");
  const size_t dot = header.find('.');
  int64_t signed_at = 0;
  const std::string_view time = header.substr(0, dot);
  auto [end, ec] = std::from_chars(time.data(), time.data() + time.size(), signed_at);
  if (dot == std::string_view::npos || ec != std::errc() || end != time.data() + time.size()) {
    return PermissionDeniedError("X-KCoral-Peer is malformed");
  }
  if (signed_at < unix_seconds - kPeerClockSkewSeconds ||
      signed_at > unix_seconds + kPeerClockSkewSeconds) {
    return PermissionDeniedError("X-KCoral-Peer is outside the allowed minute (clock skew?)");
  }
  if (!ConstantTimeEquals(header.substr(dot + 1), Mac(secret, time, method, target))) {
    return PermissionDeniedError("X-KCoral-Peer does not verify under the cluster's secret");
  }
  return Status::Ok();
}

}  // namespace kc::cluster
