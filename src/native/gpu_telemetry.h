// ReadGpuSnapshot: reads a CUDA device's GpuSnapshot (gpu_snapshot.h) through NVML
// (nvml_snapshot.h does the NVML half).
//
// The CUDA device is matched to its NVML handle by PCI bus id (cudaDeviceGetPCIBusId, then
// nvmlDeviceGetHandleByPciBusId_v2): NVML ignores CUDA_VISIBLE_DEVICES, so device ordinals of
// the two APIs need not agree, and a sandboxed worker sees only its own GPU's device node.
//
// Cost: a dozen NVML queries, tens of microseconds; take it outside the timed span. Thread-safe.
//
//   KC_ASSIGN_OR_RETURN(GpuSnapshot start, ReadGpuSnapshot(device));
//   ... timed span ...
//   KC_ASSIGN_OR_RETURN(GpuSnapshot end, ReadGpuSnapshot(device));
//   AddClockFindings(start, end, found);  // span_findings.h: flags and conditions
#pragma once

#include "base/status.h"
#include "native/gpu_snapshot.h"

namespace kc::native {

// kUnavailable when NVML cannot be loaded or initialised, when there is no such CUDA device,
// or when NVML does not know its bus id. A single field NVML fails to read does not fail the
// snapshot: it stays empty and, unless merely unsupported, its error is listed.
StatusOr<GpuSnapshot> ReadGpuSnapshot(int cuda_device);

}  // namespace kc::native
