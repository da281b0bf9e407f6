// ReadNvmlSnapshot: the NVML half of ReadGpuSnapshot (gpu_telemetry.h), for the GPU at a PCI
// bus id. Needs no CUDA, so tests run it against a fake NVML library.
#pragma once

#include <string>

#include "base/nvml_library.h"
#include "base/status.h"
#include "native/gpu_snapshot.h"

namespace kc::native {

// kUnavailable when NVML has no device at `pci_bus_id`. A field NVML fails to read stays empty
// and, unless merely unsupported, its error is listed in the snapshot's `errors`. cuda_device
// is left at -1 for the caller to fill.
StatusOr<GpuSnapshot> ReadNvmlSnapshot(const NvmlLibrary& nvml, const std::string& pci_bus_id);

}  // namespace kc::native
