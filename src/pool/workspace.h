// Workspace: a worker's private directory on the host, bound at /work inside
// its sandbox (HOME and caches under .kcoral/, and /tmp too when
// unsandboxed), so that everything a request writes to disk lives in one
// place the server removes.
//
// Owned by the seat thread of the worker's occupant. The destructor removes
// the directory; Empty() clears it between requests of a reused worker.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "base/status.h"

namespace kc::pool {

class Workspace {
 public:
  // Creates `path` with .kcoral/{home,tmp,cache}, owned by `owner` (the
  // sandbox user) or by the server when `owner` is -1.
  static StatusOr<Workspace> Create(std::filesystem::path path, uid_t owner, gid_t group);

  Workspace() = default;
  Workspace(Workspace&& other) noexcept
      : path_(std::exchange(other.path_, {})), owner_(other.owner_), group_(other.group_) {}
  Workspace& operator=(Workspace&& other) noexcept;
  ~Workspace() { Remove(); }

  // Removes what the last request left and restores the layout; false if
  // something could not be removed (the worker is then retired).
  bool Empty();

  const std::filesystem::path& path() const { return path_; }
  // HOME's caches (.kcoral/cache); the build cache restores into it.
  std::filesystem::path cache() const { return path_ / ".kcoral" / "cache"; }
  uid_t owner() const { return owner_; }
  gid_t group() const { return group_; }

 private:
  explicit Workspace(std::filesystem::path path, uid_t owner, gid_t group)
      : path_(std::move(path)), owner_(owner), group_(group) {}
  Status MakeLayout();
  void Remove();

  std::filesystem::path path_;
  uid_t owner_ = static_cast<uid_t>(-1);
  gid_t group_ = static_cast<gid_t>(-1);
};

}  // namespace kc::pool
