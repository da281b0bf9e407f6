// Node-to-node trust (docs/cluster.md "Node-to-node trust"): every request one node makes of
// another (a blob fetch, a result push) carries X-KCoral-Peer: "<unix seconds>.<hex MAC>",
// HMAC-SHA256 under the cluster's shared secret over the time, the method and the target.
// A node outside the cluster, without the secret, gets 403 and nothing else; a captured header
// is good for one minute and only for that method and path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kc::cluster {

inline constexpr std::string_view kPeerHeader = "X-KCoral-Peer";
inline constexpr int64_t kPeerClockSkewSeconds = 60;

std::string SignPeerRequest(std::string_view secret, std::string_view method,
                            std::string_view target, int64_t unix_seconds);

// kPermissionDenied naming what is wrong (never the secret or the expected MAC).
Status CheckPeerRequest(std::string_view secret, std::string_view header, std::string_view method,
                        std::string_view target, int64_t unix_seconds);

int64_t UnixSecondsNow();

}  // namespace kc::cluster
