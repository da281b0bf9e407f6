// The last steps into a worker's sandbox, as root, before user code runs:
// join the worker's cgroups, drop to the sandbox user with no capabilities
// and no way to gain any, and keep only the descriptors the worker needs.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace kc::worker {

// Moves this process into each cgroup (writes "0" to its cgroup.procs); what
// it starts later is born there.
Status JoinCgroups(const std::vector<std::string>& procs_files);

// Empties the capability bounding set, switches every uid and gid (and the
// supplementary groups) to `uid`/`gid`, which clears the remaining
// capabilities, and sets no_new_privs so no exec can bring them back.
Status DropPrivileges(uid_t uid, gid_t gid);

// Closes every descriptor except `keep_fd`; 0, 1 and 2 read and write
// /dev/null (the server's output pipes replace 1 and 2 during a request).
Status CloseInheritedFds(int keep_fd);

}  // namespace kc::worker
