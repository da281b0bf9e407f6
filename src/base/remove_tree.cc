#include "base/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace kc {

// A directory is emptied first through a no-follow descriptor.
bool RemoveTreeAt(int dir_fd, const std::string& name) {
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) return true;
  if (errno != EISDIR && errno != EPERM) return false;  // EPERM: Linux's answer for a directory
  UniqueFd child(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  bool ok = child.valid() && RemoveContents(child.get());
  return ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0 && ok;
}

std::vector<std::string> EntryNames(int dir_fd) {
  std::vector<std::string> names;
  UniqueFd listing(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  DIR* dir = listing.valid() ? ::fdopendir(listing.get()) : nullptr;
  if (dir == nullptr) return names;
  listing.Release();  // owned by `dir` now
  ::rewinddir(dir);   // the descriptor shares its offset with dir_fd
  while (dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

bool RemoveContents(int dir_fd, const std::string& except) {
  if (::fcntl(dir_fd, F_GETFD) < 0) return false;
  bool ok = true;
  for (const std::string& name : EntryNames(dir_fd)) {
    if (name != except) ok = RemoveTreeAt(dir_fd, name) && ok;
  }
  return ok;
}

bool RemoveTree(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  UniqueFd parent_fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return parent_fd.valid() && RemoveTreeAt(parent_fd.get(), path.substr(slash + 1));
}

}  // namespace kc
