// Walking and removing directories that untrusted code could write to while
// we work on them. Every step is relative to a descriptor opened with O_NOFOLLOW, so a
// symbolic link planted (or swapped in mid-walk) is unlinked, never followed:
// nothing outside the tree can be removed (unlike a path-based walk).
#pragma once

#include <string>
#include <vector>

namespace kc {

// The entries of the directory `dir_fd` ("." and ".." left out), read through
// a duplicate so `dir_fd` itself stays usable.
std::vector<std::string> EntryNames(int dir_fd);

// Removes everything inside the directory `dir_fd` but the entry named
// `except` (the directory itself stays). Best effort: what cannot be removed
// is left, and the result is false.
bool RemoveContents(int dir_fd, const std::string& except = "");

// Removes the entry `name` of `dir_fd`, a whole tree if it is a directory.
bool RemoveTreeAt(int dir_fd, const std::string& name);

// Removes `path` and everything below it; a link at `path` is unlinked.
bool RemoveTree(const std::string& path);

}  // namespace kc
