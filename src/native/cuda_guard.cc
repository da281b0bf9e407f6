#include "native/cuda_guard.h"

#include <Python.h>
#include <time.h>

#include <mutex>
#include <thread>

#include "native/cuda_status.h"
#include "native/python_stack.h"

namespace kc::native {
namespace {

// Uploaded modules are compiled with this filename prefix (worker engine).
constexpr std::string_view kUploadedPrefix = "<uploaded:";

int64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

}  // namespace

StatusOr<CudaGuard*> CudaGuard::Get() {
  static std::mutex init_mu;
  static CudaGuard* instance = nullptr;  // leaked: CUPTI holds its address until exit
  std::lock_guard<std::mutex> lock(init_mu);
  if (instance != nullptr) return instance;
  auto* guard = new CudaGuard();
  CUptiResult result = cuptiSubscribe(&guard->subscriber_, &OnCallback, guard);
  if (result != CUPTI_SUCCESS) {
    delete guard;
    return CuptiStatus(result, "cuptiSubscribe", __FILE__, __LINE__);
  }
  instance = guard;
  return instance;
}

Status CudaGuard::EnableDomains(bool enable) {
  const uint32_t flag = enable ? 1 : 0;
  KC_CUPTI_RETURN_IF_ERROR(cuptiEnableDomain(flag, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API));
  KC_CUPTI_RETURN_IF_ERROR(cuptiEnableDomain(flag, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API));
  return Status::Ok();
}

Status CudaGuard::Begin() {
  access_ = CudaAccess();
  recorded_.store(false);
  claimed_.store(false);
  armed_.store(true);
  Status enabled = EnableDomains(true);
  if (!enabled.ok()) {
    armed_.store(false);
    static_cast<void>(EnableDomains(false));  // undo a half-enabled state; first error wins
  }
  return enabled;
}

StatusOr<std::optional<CudaAccess>> CudaGuard::End() {
  Status disabled = EnableDomains(false);
  armed_.store(false);
  // Closing the claim: after this, no late callback can start writing access_.
  if (!claimed_.exchange(true)) {
    if (!disabled.ok()) return disabled;
    return std::optional<CudaAccess>();
  }
  // A callback claimed the entry. Another thread's may be waiting for the GIL in Record(), so
  // wait without holding it.
  if (!recorded_.load(std::memory_order_acquire)) {
    PyThreadState* saved = PyGILState_Check() ? PyEval_SaveThread() : nullptr;
    while (!recorded_.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
    if (saved != nullptr) PyEval_RestoreThread(saved);
  }
  return std::optional<CudaAccess>(access_);
}

void CUPTIAPI CudaGuard::OnCallback(void* userdata, CUpti_CallbackDomain domain,
                                    CUpti_CallbackId callback_id, const void* callback_data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* data = static_cast<const CUpti_CallbackData*>(callback_data);
  if (data == nullptr || data->callbackSite != CUPTI_API_ENTER) return;
  auto* self = static_cast<CudaGuard*>(userdata);
  if (!self->armed_.load()) return;
  if (self->claimed_.exchange(true)) return;  // only the first entry is recorded
  self->Record(data->functionName);
}

void CudaGuard::SetLocation(PythonStack stack) {
  access_.location = std::move(stack.location);
  access_.stack = std::move(stack.stack);
}

// Runs inside the intercepted CUDA call, on the calling thread.
void CudaGuard::Record(const char* function_name) {
  access_.detected_ns = MonotonicNs();
  access_.cuda_call = function_name != nullptr ? function_name : "<unknown CUDA API>";
  access_.location = "<native>";
  if (Py_IsInitialized()) {
    if (PyGILState_Check()) {
      SetLocation(DescribePythonStack(kUploadedPrefix));
    } else if (PyGILState_GetThisThreadState() != nullptr) {
      // A Python thread inside C code that released the GIL (torch's op bindings do, so this is
      // the common case). Its frames are only readable with the GIL: take it back for the one
      // recorded entry, as the reference's Python-level CUPTI callback does implicitly.
      PyGILState_STATE state = PyGILState_Ensure();
      SetLocation(DescribePythonStack(kUploadedPrefix));
      PyGILState_Release(state);
    }
    // Otherwise a thread Python never saw (a native worker thread): "<native>".
  }
  recorded_.store(true, std::memory_order_release);
}

}  // namespace kc::native
