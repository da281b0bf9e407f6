#include "pool/workspace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/remove_tree.h"
#include "base/unique_fd.h"

namespace kc::pool {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLayout[] = {".kcoral", ".kcoral/home", ".kcoral/tmp", ".kcoral/cache"};

}  // namespace

StatusOr<Workspace> Workspace::Create(fs::path path, uid_t owner, gid_t group) {
  Workspace workspace(std::move(path), owner, group);
  if (::mkdir(workspace.path_.c_str(), 0700) != 0) {
    Status error = InternalError("cannot create the workspace " + workspace.path_.string() + ": " +
                                 std::strerror(errno));
    workspace.path_.clear();  // not ours to remove
    return error;
  }
  KC_RETURN_IF_ERROR(workspace.MakeLayout());
  return workspace;
}

Workspace& Workspace::operator=(Workspace&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, {});
    owner_ = other.owner_;
    group_ = other.group_;
  }
  return *this;
}

Status Workspace::MakeLayout() {
  for (const fs::path& dir :
       {path_, path_ / kLayout[0], path_ / kLayout[1], path_ / kLayout[2], path_ / kLayout[3]}) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return InternalError("cannot create " + dir.string() + ": " + std::strerror(errno));
    if (owner_ != static_cast<uid_t>(-1) && ::lchown(dir.c_str(), owner_, group_) != 0)
      return InternalError("cannot hand " + dir.string() + " to the sandbox user");
  }
  return Status::Ok();
}

bool Workspace::Empty() {
  if (path_.empty()) return false;
  // User code may still run beside us (background processes of a reused
  // worker), so the walk never follows a link (base/remove_tree.h).
  UniqueFd root(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  const bool emptied = root.valid() && RemoveContents(root.get());
  return MakeLayout().ok() && emptied;
}

void Workspace::Remove() {
  if (path_.empty()) return;
  RemoveTree(path_.string());
  path_.clear();
}

}  // namespace kc::pool
