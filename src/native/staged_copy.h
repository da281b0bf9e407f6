// Host-to-device copies of uploaded tensors through pinned staging buffers (issue 11).
//
// A copy from pageable memory (a blob's mapping) makes the driver bounce it through a small
// page-locked buffer of its own, one piece at a time: on the H200 1 GiB took 148-153 ms. Here
// the source is cut into slices, one per lane (a host thread with two pinned chunks that take
// turns, so that the host copy into one overlaps the DMA out of the other): the host copy,
// with the mapping's page faults, is the bound, and lanes share it. In a probe there
// (bench/h2d_copy.cu), 1 GiB took 148 ms with one lane, 85-89 ms with 2, 45-50 with 4 and
// 34-44 with 8. The chunks are allocated on a lane's first use and kept for the process's
// life, like the L2 flush buffer.
//
// Usage:
//   KC_RETURN_IF_ERROR(CopyToDeviceStaged(host, device_ptr, bytes, stream, /*lanes=*/4));
//   // later work on `stream` sees the bytes; the host memory may be released on return
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace kc::native {

// Copies `bytes` from host memory `source` to device memory `destination` on `stream`, on up
// to `lanes` threads (fewer for a small copy; the caller's thread is one). Every byte of
// `source` has been read when it returns; the device copies complete in stream order.
Status CopyToDeviceStaged(const void* source, void* destination, size_t bytes, cudaStream_t stream,
                          int lanes);

}  // namespace kc::native
