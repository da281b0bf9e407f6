#include "worker/view_templates.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "worker/mount_view.h"

namespace kc::worker {

namespace {

std::string ViewKey(const ipc::SandboxSpec& spec) {
  const std::string workspaces = spec.workspace.substr(0, spec.workspace.rfind('/'));
  return nlohmann::json{spec.readonly_paths, spec.device_nodes, spec.uid, spec.gid,
                        spec.new_root,       workspaces}
      .dump();
}

// In the helper: builds the template, reports "" or the error, then stays
// until the zygote has opened its namespace and closes `hold`.
[[noreturn]] void RunHelper(const ipc::SandboxSpec& spec, int report, int hold) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string error;
  if (::unshare(CLONE_NEWNS) != 0) {
    error = std::string("mount view: new mount namespace: ") + std::strerror(errno);
  } else if (Status built = BuildViewTemplate(spec); !built.ok()) {
    error = built.message();
  }
  if (!error.empty()) (void)!::write(report, error.data(), error.size());
  ::close(report);
  char byte;
  while (::read(hold, &byte, 1) < 0 && errno == EINTR) {
  }
  ::_exit(0);
}

StatusOr<UniqueFd> BuildTemplate(const ipc::SandboxSpec& spec) {
  int report[2], hold[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return InternalError("mount view: pipe");
  UniqueFd report_read(report[0]), report_write(report[1]);
  if (::pipe2(hold, O_CLOEXEC) != 0) return InternalError("mount view: pipe");
  UniqueFd hold_read(hold[0]), hold_write(hold[1]);
  const pid_t helper = ::fork();
  if (helper < 0) return InternalError(std::string("mount view: fork: ") + std::strerror(errno));
  if (helper == 0) {
    report_read.Reset();
    hold_write.Reset();  // or the helper would hold itself open
    RunHelper(spec, report_write.get(), hold_read.get());
  }
  report_write.Reset();
  hold_read.Reset();
  std::string error;
  char buffer[1024];
  for (ssize_t n; (n = ::read(report_read.get(), buffer, sizeof buffer)) != 0;) {
    if (n > 0)
      error.append(buffer, n);
    else if (errno != EINTR)
      break;
  }
  UniqueFd view;
  if (error.empty()) {
    view.Reset(
        ::open(("/proc/" + std::to_string(helper) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC));
    if (!view.valid())
      error = std::string("mount view: open the template: ") + std::strerror(errno);
  }
  hold_write.Reset();  // the helper exits
  while (::waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (!error.empty()) return FailedPreconditionError(error);
  return view;
}

}  // namespace

StatusOr<int> ViewTemplates::For(const ipc::SandboxSpec& spec) {
  const std::string key = ViewKey(spec);
  auto found = by_view_.find(key);
  if (found != by_view_.end()) return found->second.get();
  KC_ASSIGN_OR_RETURN(UniqueFd view, BuildTemplate(spec));
  const int fd = view.get();
  by_view_.emplace(key, std::move(view));
  return fd;
}

}  // namespace kc::worker
