#include "native/persisting_l2.h"

#include <cuda_runtime_api.h>

#include "native/cuda_status.h"

namespace kc::native {

PersistingL2Guard::~PersistingL2Guard() {
  if (active_ && saved_limit_ != 0) {
    static_cast<void>(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, saved_limit_));
  }
}

Status PersistingL2Guard::Begin() {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetLimit(&saved_limit_, cudaLimitPersistingL2CacheSize));
  if (saved_limit_ != 0) {
    KC_CUDA_RETURN_IF_ERROR(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
    flags_.push_back("the program had set a persisting-L2 limit of " +
                     std::to_string(saved_limit_) +
                     " bytes; it was 0 during the benchmark and is restored after");
  }
  active_ = true;
  return Status::Ok();
}

Status PersistingL2Guard::BeforeCall() {
  if (!active_) return Status::Ok();
  KC_CUDA_RETURN_IF_ERROR(cudaCtxResetPersistingL2Cache());
  return Status::Ok();
}

Status PersistingL2Guard::AfterTimedCall() {
  if (!active_) return Status::Ok();
  size_t limit = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize));
  if (limit == 0) return Status::Ok();
  if (!raised_flagged_) {
    flags_.push_back("a timed call raised the persisting-L2 limit to " + std::to_string(limit) +
                     " bytes (set back to 0 before the next call)");
    raised_flagged_ = true;
  }
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
  return Status::Ok();
}

}  // namespace kc::native
