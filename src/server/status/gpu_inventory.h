// GpuInventory: what the server needs to know about a physical GPU before any
// worker starts: its UUID (workers are pinned by UUID, spec/server.md §2.4)
// and its compile target (`sm_<major><minor>`, `a` suffix from major 9).
// Read through nvidia-smi, so the server itself never initializes CUDA.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace kc::server {

struct GpuInfo {
  int index = 0;
  std::string uuid;           // "GPU-..."
  std::string name;           // "NVIDIA H200"
  std::string arch;           // "sm_90a"
  std::string tvm_arch_list;  // "9.0a", for TVM_FFI_CUDA_ARCH_LIST
  std::string pci_bus_id;     // "00000000:18:00.0"
};

StatusOr<GpuInfo> QueryGpu(int index);

// The device nodes a sandboxed worker of this GPU needs: its own
// /dev/nvidia<minor> (minor from /proc/driver/nvidia, else the index) and the
// shared control and UVM nodes, those that exist.
std::vector<std::string> DeviceNodesFor(const GpuInfo& gpu);

// "9.0" -> "sm_90a"; "8.6" -> "sm_86".
std::string ArchFromComputeCapability(const std::string& capability);

}  // namespace kc::server
