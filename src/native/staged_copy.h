// Host-to-device copies of uploaded tensors through pinned staging buffers (issue 11).
//
// A copy from pageable memory (a blob's mapping) makes the driver bounce it through a small
// page-locked buffer of its own, one piece at a time: on the H200 1 GiB took 180-193 ms. Here
// a few pinned chunks take turns, so that the host copy into one overlaps the DMA out of the
// others (27-49 ms per GiB in a probe there). The chunks are allocated on first use and kept
// for the process's life, like the L2 flush buffer.
//
// Usage:
//   KC_RETURN_IF_ERROR(CopyToDeviceStaged(host, device_ptr, bytes, stream));
//   // later work on `stream` sees the bytes; the host memory may be released on return
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace kc::native {

// Copies `bytes` from host memory `source` to device memory `destination` on `stream`. Every
// byte of `source` has been read when it returns; the device copies complete in stream order.
Status CopyToDeviceStaged(const void* source, void* destination, size_t bytes, cudaStream_t stream);

}  // namespace kc::native
