#include "worker/mount_view.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "base/memfd.h"
#include "base/unique_fd.h"

namespace kc::worker {

namespace {

// /etc entries a worker may need (the loader, locale, name service for
// loopback); passwd, group and hosts are written, not bound (see WriteEtc).
constexpr const char* kEtcEntries[] = {
    "/etc/ld.so.cache",     "/etc/ld.so.conf",    "/etc/ld.so.conf.d", "/etc/alternatives",
    "/etc/localtime",       "/etc/nsswitch.conf", "/etc/gai.conf",     "/etc/ssl",
    "/etc/ca-certificates", "/etc/mime.types",
};
// The system's programs and libraries, and the NVIDIA tools' folder (ncu,
// compute-sanitizer) where it exists; the interpreter's own paths come in
// the spec.
constexpr const char* kSystemPaths[] = {"/usr",   "/bin",    "/sbin", "/lib",       "/lib32",
                                        "/lib64", "/libx32", "/sys",  "/opt/nvidia"};
constexpr const char* kDeviceNodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                        "/dev/urandom"};

Status Failed(const std::string& step) {
  return FailedPreconditionError("mount view: " + step + ": " + std::strerror(errno));
}

Status MakeDirs(const std::string& path) {
  size_t slash = 0;
  do {
    slash = path.find('/', slash + 1);
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return Failed("mkdir " + prefix);
  } while (slash != std::string::npos);
  return Status::Ok();
}

// A directory or an empty file at `target`, to mount `source` on.
Status MakeMountPoint(const std::string& target, bool directory) {
  const std::string parent = target.substr(0, target.rfind('/'));
  if (!parent.empty()) KC_RETURN_IF_ERROR(MakeDirs(parent));
  if (directory) return MakeDirs(target);
  UniqueFd file(::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!file.valid() && errno != EEXIST) return Failed("create " + target);
  return Status::Ok();
}

// Mount points at or below `top`, from /proc/self/mountinfo (field 5).
// Plain reads, no iostreams (see privileges.cc).
std::vector<std::string> MountsBelow(const std::string& top) {
  std::vector<std::string> found;
  UniqueFd file(::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC));
  auto text = file.valid() ? ReadWholeFd(file.get()) : StatusOr<std::string>(InternalError(""));
  if (!text.ok()) return found;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const std::string_view line(text->data() + start, end - start);
    start = end + 1;
    size_t field = 0, begin = 0;
    for (int i = 0; i < 4 && begin != std::string_view::npos; ++i)
      begin = line.find(' ', begin) + 1;
    if (begin == 0 || begin >= line.size()) continue;
    field = line.find(' ', begin);
    const std::string mount_point(line.substr(begin, field - begin));
    if (mount_point == top || mount_point.rfind(top + "/", 0) == 0) found.push_back(mount_point);
  }
  return found;
}

// A recursive bind remounted read-only, submounts included (a remount
// changes one mount only), without setuid or device files. /sys alone is
// bound without its submounts (cgroup, debugfs, bpf, ...): workers read
// sysfs itself (CPU topology, PCI devices for NVML), and every mount costs
// each new worker time to copy and to tear down.
Status BindReadOnly(const std::string& source, const std::string& target, bool directory) {
  const unsigned long recursive = source == "/sys" || !directory ? 0 : MS_REC;
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | recursive, nullptr) != 0)
    return Failed("bind " + source);
  // Only a recursive bind can have brought submounts along.
  const std::vector<std::string> mounts =
      recursive != 0 ? MountsBelow(target) : std::vector<std::string>{target};
  for (const std::string& mount_point : mounts) {
    if (::mount(nullptr, mount_point.c_str(), nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
      return Failed("remount read-only " + mount_point);
    }
  }
  return Status::Ok();
}

// Binds every existing path read-only at the same place under `root`. A
// symbolic link (/bin -> usr/bin) is recreated as a link and its target bound.
// Paths below one already bound are visible through it and skipped.
Status BindReadOnlyPaths(const std::vector<std::string>& paths, const std::string& root) {
  std::vector<std::string> sources;
  for (const std::string& path : paths) {
    struct stat st;
    if (path.size() < 2 || path[0] != '/' || ::lstat(path.c_str(), &st) != 0) continue;
    if (!S_ISLNK(st.st_mode)) {
      sources.push_back(path);
      continue;
    }
    char link[PATH_MAX], resolved[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0 || ::realpath(path.c_str(), resolved) == nullptr) continue;  // dangling
    link[n] = '\0';
    const std::string at = root + path;
    KC_RETURN_IF_ERROR(MakeDirs(at.substr(0, at.rfind('/'))));
    if (::symlink(link, at.c_str()) != 0 && errno != EEXIST) return Failed("symlink " + path);
    sources.push_back(resolved);
  }
  std::sort(sources.begin(), sources.end());
  std::vector<std::string> bound;
  for (const std::string& source : sources) {
    const bool covered = std::any_of(bound.begin(), bound.end(), [&](const std::string& b) {
      return source == b || source.rfind(b + "/", 0) == 0;
    });
    struct stat st;
    if (covered || source == "/" || ::stat(source.c_str(), &st) != 0) continue;
    KC_RETURN_IF_ERROR(MakeMountPoint(root + source, S_ISDIR(st.st_mode)));
    KC_RETURN_IF_ERROR(BindReadOnly(source, root + source, S_ISDIR(st.st_mode)));
    bound.push_back(source);
  }
  return Status::Ok();
}

Status WriteFile(const std::string& path, const std::string& text) {
  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!file.valid() || ::write(file.get(), text.data(), text.size()) != ssize_t(text.size()))
    return Failed("write " + path);
  return Status::Ok();
}

// The sandbox user is the only user besides root: tools that look their
// user up (getpass, ssh-style HOME lookups) find it; no host account leaks.
Status WriteEtc(const SandboxSpec& spec, const std::string& root) {
  KC_RETURN_IF_ERROR(MakeDirs(root + "/etc"));
  const std::string uid = std::to_string(spec.uid), gid = std::to_string(spec.gid);
  KC_RETURN_IF_ERROR(WriteFile(root + "/etc/passwd",
                               "root:x:0:0:root:/:/usr/sbin/nologin\n"
                               "kcoral:x:" +
                                   uid + ":" + gid +
                                   ":KCoral sandbox:/work/.kcoral/home:/usr/sbin/nologin\n"));
  KC_RETURN_IF_ERROR(WriteFile(root + "/etc/group", "root:x:0:\nkcoral:x:" + gid + ":\n"));
  return WriteFile(root + "/etc/hosts", "127.0.0.1 localhost kcoral\n::1 localhost\n");
}

Status BindWritable(const std::string& source, const std::string& target) {
  KC_RETURN_IF_ERROR(MakeDirs(target));
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV,
              nullptr) != 0) {
    return Failed("bind " + source + " at " + target);
  }
  return Status::Ok();
}

// /dev: a tmpfs with the harmless nodes, the GPU nodes named in the spec,
// the /proc/self/fd links and a private /dev/shm.
Status BuildDev(const SandboxSpec& spec, const std::string& root) {
  const std::string dev = root + "/dev";
  KC_RETURN_IF_ERROR(MakeDirs(dev));
  if (::mount("tmpfs", dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m") != 0)
    return Failed("tmpfs /dev");
  std::vector<std::string> nodes(std::begin(kDeviceNodes), std::end(kDeviceNodes));
  nodes.insert(nodes.end(), spec.device_nodes.begin(), spec.device_nodes.end());
  for (const std::string& node : nodes) {
    struct stat st;
    if (::stat(node.c_str(), &st) != 0) {
      if (std::find(spec.device_nodes.begin(), spec.device_nodes.end(), node) !=
          spec.device_nodes.end()) {
        return Failed("device " + node);  // asked for by the server: must be there
      }
      continue;
    }
    KC_RETURN_IF_ERROR(MakeMountPoint(root + node, S_ISDIR(st.st_mode)));
    if (::mount(node.c_str(), (root + node).c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
      return Failed("bind " + node);
  }
  const std::pair<const char*, const char*> links[] = {{"/proc/self/fd", "fd"},
                                                       {"/proc/self/fd/0", "stdin"},
                                                       {"/proc/self/fd/1", "stdout"},
                                                       {"/proc/self/fd/2", "stderr"}};
  for (const auto& [target, name] : links) {
    if (::symlink(target, (dev + "/" + name).c_str()) != 0)
      return Failed(std::string("symlink /dev/") + name);
  }
  KC_RETURN_IF_ERROR(MakeDirs(dev + "/shm"));
  if (::mount("tmpfs", (dev + "/shm").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    return Failed("tmpfs /dev/shm");
  return Status::Ok();
}

Status PivotInto(const std::string& root) {
  if (::chdir(root.c_str()) != 0) return Failed("chdir " + root);
  // pivot_root(".", ".") stacks the old root on the new one; detaching it
  // leaves only the view (the pivot_root(2) manual's idiom).
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return Failed("pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) return Failed("detach the host root");
  if (::chdir("/") != 0) return Failed("chdir /");
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    return Failed("remount / read-only");
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> BuildMountView(const SandboxSpec& spec) {
  // Nothing we mount propagates back to the host, and nothing of the host's later mounts in.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return Failed("make mounts private");
  const std::string& root = spec.new_root;
  if (::mount("tmpfs", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") != 0)
    return Failed("tmpfs root at " + root);

  std::vector<std::string> readonly = spec.readonly_paths;
  readonly.insert(readonly.end(), std::begin(kSystemPaths), std::end(kSystemPaths));
  readonly.insert(readonly.end(), std::begin(kEtcEntries), std::end(kEtcEntries));
  KC_RETURN_IF_ERROR(WriteEtc(spec, root));
  // A private /tmp first, so a read-only path below it (a checkout in /tmp)
  // is bound on top. Its files are memory, charged to the worker's cgroup,
  // and gone with the namespace.
  KC_RETURN_IF_ERROR(MakeDirs(root + "/tmp"));
  if (::mount("tmpfs", (root + "/tmp").c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    return Failed("tmpfs /tmp");
  KC_RETURN_IF_ERROR(MakeDirs(root + "/var/tmp"));
  if (::mount((root + "/tmp").c_str(), (root + "/var/tmp").c_str(), nullptr, MS_BIND, nullptr) != 0)
    return Failed("bind /var/tmp");
  KC_RETURN_IF_ERROR(BindReadOnlyPaths(readonly, root));

  // /work, as in the reference, unless something read-only lives there (a
  // development checkout under /work).
  const bool work_taken = std::any_of(readonly.begin(), readonly.end(), [](const std::string& p) {
    return p == "/work" || p.rfind("/work/", 0) == 0;
  });
  const std::string workspace = work_taken ? "/kcoral/work" : "/work";
  KC_RETURN_IF_ERROR(BindWritable(spec.workspace, root + workspace));
  KC_RETURN_IF_ERROR(BuildDev(spec, root));

  KC_RETURN_IF_ERROR(MakeDirs(root + "/proc"));
  if (::mount("proc", (root + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
    return Failed("mount /proc of the worker's PID namespace");
  }
  KC_RETURN_IF_ERROR(PivotInto(root));
  if (::chdir(workspace.c_str()) != 0) return Failed("chdir " + workspace);
  return workspace;
}

}  // namespace kc::worker
