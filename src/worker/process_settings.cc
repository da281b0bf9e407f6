#include "worker/process_settings.h"

#include <utility>

namespace kc::worker {

Status ProcessSettings::Set(ipc::WorkerSettings settings) {
  if (is_set_) {
    return FailedPreconditionError("this worker's settings are set already; they are set once");
  }
  settings_ = std::move(settings);
  is_set_ = true;
  return Status::Ok();
}

}  // namespace kc::worker
