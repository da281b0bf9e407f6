// The zygote's mount namespaces that the workers' views are copied from
// (mount_view.h), one per distinct view: the same read-only paths, device
// nodes and sandbox user (a GPU server has one per GPU). Each is built once,
// by a forked helper that mounts it in a namespace of its own and lives only
// until its namespace is held open here.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "base/unique_fd.h"
#include "ipc/sandbox_spec.h"

namespace kc::worker {

class ViewTemplates {
 public:
  // A descriptor of the template for `spec`'s view, for setns(2); the
  // templates keep it open.
  StatusOr<int> For(const ipc::SandboxSpec& spec);

 private:
  std::map<std::string, UniqueFd> by_view_;
};

}  // namespace kc::worker
