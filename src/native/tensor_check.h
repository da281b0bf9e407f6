// CheckTensorsClose: CompareTensors (tensor_compare.h) for views in host or CUDA memory, the
// entry point of _native.check_close.
//
// When either view is in CUDA memory the devices are synchronized first (the reference's
// torch.cuda.synchronize(), spec/benchmark.md §2.3), so kernels still writing the output finish
// before it is read; a CUDA error surfacing there is returned (kFailedPrecondition, or
// kUnavailable without a usable GPU). Host-only comparisons never touch CUDA. Call without the
// GIL; the views' owners (dlpack_export.h) must outlive the call.
#pragma once

#include "base/status.h"
#include "native/close_check.h"
#include "native/element_source.h"

namespace kc::native {

StatusOr<CloseResult> CheckTensorsClose(const TensorView& actual, const TensorView& expected,
                                        Tolerance tolerance);

}  // namespace kc::native
