// CloseInBackground: closes a file descriptor on a thread kept for that. Closing the last
// descriptor of a large memfd frees its pages in the closing thread (about 55 ms for 256 MiB on
// the 2-core VM), and whoever drops a large blob's last reference may be an event loop or a
// cache tier evicting it under its lock.
//
//   CloseInBackground(std::move(fd));  // returns at once; closed in order, soon after
#pragma once

#include "base/unique_fd.h"

namespace kc {

void CloseInBackground(UniqueFd fd);

}  // namespace kc
