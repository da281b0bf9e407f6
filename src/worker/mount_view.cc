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

// What one read-only path of the spec becomes in the view: `source` (a
// symbolic link's target, resolved) bound at the same place, after the links
// that lead to it are recreated.
struct ReadOnlyBind {
  std::string source;
  bool directory = false;
};
struct ReadOnlyPlan {
  std::vector<std::pair<std::string, std::string>> links;  // {path, link text}
  std::vector<ReadOnlyBind> binds;                         // sorted, none below another
};

// Reads the host (stat, readlink): call it before entering the view. Paths
// below one already bound are visible through it and skipped.
ReadOnlyPlan PlanReadOnlyBinds(const std::vector<std::string>& paths) {
  ReadOnlyPlan plan;
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
    plan.links.emplace_back(path, link);
    sources.push_back(resolved);
  }
  std::sort(sources.begin(), sources.end());
  for (const std::string& source : sources) {
    const bool covered = std::any_of(plan.binds.begin(), plan.binds.end(), [&](const auto& b) {
      return source == b.source || source.rfind(b.source + "/", 0) == 0;
    });
    struct stat st;
    if (covered || source == "/" || ::stat(source.c_str(), &st) != 0) continue;
    plan.binds.push_back({source, S_ISDIR(st.st_mode)});
  }
  return plan;
}

bool BelowTmp(const std::string& path) {
  return path.rfind("/tmp/", 0) == 0;
}

Status WriteFile(const std::string& path, const std::string& text) {
  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!file.valid() || ::write(file.get(), text.data(), text.size()) != ssize_t(text.size()))
    return Failed("write " + path);
  return Status::Ok();
}

// The sandbox user is the only user besides root: tools that look their
// user up (getpass, ssh-style HOME lookups) find it; no host account leaks.
Status WriteEtc(const ipc::SandboxSpec& spec, const std::string& root) {
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
// the /proc/self/fd links and where each worker's /dev/shm goes.
Status BuildDev(const ipc::SandboxSpec& spec, const std::string& root) {
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
  return MakeDirs(dev + "/shm");  // each worker mounts its own
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

std::vector<std::string> AllReadOnlyPaths(const ipc::SandboxSpec& spec) {
  std::vector<std::string> paths = spec.readonly_paths;
  paths.insert(paths.end(), std::begin(kSystemPaths), std::end(kSystemPaths));
  paths.insert(paths.end(), std::begin(kEtcEntries), std::end(kEtcEntries));
  return paths;
}

// /work, as in the reference, unless something read-only lives there (a
// development checkout under /work).
std::string WorkspaceInView(const std::vector<std::string>& readonly) {
  const bool work_taken = std::any_of(readonly.begin(), readonly.end(), [](const std::string& p) {
    return p == "/work" || p.rfind("/work/", 0) == 0;
  });
  return work_taken ? "/kcoral/work" : "/work";
}

std::string ParentOf(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}

// What only the setup sees: the host's workspace root (each worker binds its
// own workspace from it) and the read-only paths that live below /tmp (each
// worker binds them again on its private /tmp). Detached before user code.
constexpr const char* kSetup = "/.kcoral-setup";

}  // namespace

Status BuildViewTemplate(const ipc::SandboxSpec& spec) {
  // Nothing we mount propagates back to the host, nor between the workers' copies.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return Failed("make mounts private");
  const std::string& root = spec.new_root;
  if (::mount("tmpfs", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") != 0)
    return Failed("tmpfs root at " + root);
  KC_RETURN_IF_ERROR(WriteEtc(spec, root));
  const std::string setup = root + kSetup;
  KC_RETURN_IF_ERROR(MakeDirs(setup));
  if (::mount("tmpfs", setup.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=1m") != 0)
    return Failed("tmpfs " + std::string(kSetup));

  const std::vector<std::string> readonly = AllReadOnlyPaths(spec);
  const ReadOnlyPlan plan = PlanReadOnlyBinds(readonly);
  for (const auto& [path, link] : plan.links) {
    const std::string at = root + path;
    KC_RETURN_IF_ERROR(MakeDirs(ParentOf(at)));
    if (::symlink(link.c_str(), at.c_str()) != 0 && errno != EEXIST)
      return Failed("symlink " + path);
  }
  int below_tmp = 0;
  for (const ReadOnlyBind& bind : plan.binds) {
    const std::string at =
        BelowTmp(bind.source) ? setup + "/ro" + std::to_string(below_tmp++) : root + bind.source;
    KC_RETURN_IF_ERROR(MakeMountPoint(at, bind.directory));
    KC_RETURN_IF_ERROR(BindReadOnly(bind.source, at, bind.directory));
  }
  KC_RETURN_IF_ERROR(BindWritable(ParentOf(spec.workspace), setup + "/workspaces"));
  for (const char* point : {"/tmp", "/var/tmp", "/proc"})
    KC_RETURN_IF_ERROR(MakeDirs(root + point));
  KC_RETURN_IF_ERROR(MakeDirs(root + WorkspaceInView(readonly)));
  KC_RETURN_IF_ERROR(BuildDev(spec, root));
  return PivotInto(root);
}

StatusOr<std::string> EnterView(const ipc::SandboxSpec& spec) {
  const std::vector<std::string> readonly = AllReadOnlyPaths(spec);
  const ReadOnlyPlan plan = PlanReadOnlyBinds(readonly);  // reads the host: before entering
  std::vector<ReadOnlyBind> below_tmp;
  for (const ReadOnlyBind& bind : plan.binds)
    if (BelowTmp(bind.source)) below_tmp.push_back(bind);
  if (::setns(spec.view_fd, CLONE_NEWNS) != 0) return Failed("enter the view's template");
  if (::unshare(CLONE_NEWNS) != 0) return Failed("copy the view's template");

  // A private /tmp and /var/tmp: its files are memory, charged to the
  // worker's cgroup, and gone with the namespace.
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    return Failed("tmpfs /tmp");
  for (const auto& [path, link] : plan.links) {
    if (!BelowTmp(path)) continue;
    KC_RETURN_IF_ERROR(MakeDirs(ParentOf(path)));
    if (::symlink(link.c_str(), path.c_str()) != 0 && errno != EEXIST)
      return Failed("symlink " + path);
  }
  const std::string setup = kSetup;
  for (size_t i = 0; i < below_tmp.size(); ++i) {
    const ReadOnlyBind& bind = below_tmp[i];
    KC_RETURN_IF_ERROR(MakeMountPoint(bind.source, bind.directory));
    const std::string stashed = setup + "/ro" + std::to_string(i);
    if (::mount(stashed.c_str(), bind.source.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
      return Failed("bind " + bind.source);
  }
  if (::mount("/tmp", "/var/tmp", nullptr, MS_BIND, nullptr) != 0) return Failed("bind /var/tmp");
  if (::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    return Failed("tmpfs /dev/shm");
  const std::string workspace = WorkspaceInView(readonly);
  const std::string name = spec.workspace.substr(spec.workspace.rfind('/') + 1);
  KC_RETURN_IF_ERROR(BindWritable(setup + "/workspaces/" + name, workspace));
  if (::umount2(kSetup, MNT_DETACH) != 0) return Failed("detach the setup's mounts");
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return Failed("mount /proc of the worker's PID namespace");
  if (::chdir(workspace.c_str()) != 0) return Failed("chdir " + workspace);
  return workspace;
}

}  // namespace kc::worker
