#include "server/status/gpu_inventory.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

namespace kc::server {

namespace {

std::string Trim(std::string text) {
  const char* space = " \t\r\n";
  text.erase(0, text.find_first_not_of(space));
  text.erase(text.find_last_not_of(space) + 1);
  return text;
}

}  // namespace

std::string ArchFromComputeCapability(const std::string& capability) {
  const size_t dot = capability.find('.');
  if (dot == std::string::npos) return "";
  const std::string major = capability.substr(0, dot);
  const std::string minor = capability.substr(dot + 1);
  // Both parts must be plain numbers: no exception for "x.0" or an overflow.
  int major_number = 0, minor_number = 0;
  auto is_number = [](const std::string& text, int* value) {
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, *value);
    return !text.empty() && ec == std::errc() && ptr == end && *value >= 0;
  };
  if (!is_number(major, &major_number) || !is_number(minor, &minor_number)) return "";
  return "sm_" + major + minor + (major_number >= 9 ? "a" : "");
}

StatusOr<GpuInfo> QueryGpu(int index) {
  const std::string command =
      "nvidia-smi --query-gpu=uuid,compute_cap,pci.bus_id,name --format=csv,noheader -i " +
      std::to_string(index) + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return UnavailableError("cannot run nvidia-smi");
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe.get()) != nullptr)
    output += buffer;
  std::istringstream fields(output);
  GpuInfo info;
  info.index = index;
  std::string capability;
  if (!std::getline(fields, info.uuid, ',') || !std::getline(fields, capability, ',') ||
      !std::getline(fields, info.pci_bus_id, ',') || !std::getline(fields, info.name)) {
    return UnavailableError("GPU " + std::to_string(index) + " not found: " + Trim(output));
  }
  info.uuid = Trim(info.uuid);
  info.name = Trim(info.name);
  info.pci_bus_id = Trim(info.pci_bus_id);
  capability = Trim(capability);
  info.arch = ArchFromComputeCapability(capability);
  if (info.uuid.rfind("GPU-", 0) != 0 || info.arch.empty()) {
    return UnavailableError("unexpected nvidia-smi output: " + Trim(output));
  }
  info.tvm_arch_list = capability + (info.arch.back() == 'a' ? "a" : "");
  return info;
}

std::vector<std::string> DeviceNodesFor(const GpuInfo& gpu) {
  int minor = gpu.index;
  // /proc/driver/nvidia/gpus/ names a GPU by a 4-digit PCI domain, lower case.
  std::string bus = gpu.pci_bus_id.size() > 12 ? gpu.pci_bus_id.substr(gpu.pci_bus_id.size() - 12)
                                               : gpu.pci_bus_id;
  for (char& c : bus)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::ifstream information("/proc/driver/nvidia/gpus/" + bus + "/information");
  for (std::string line; std::getline(information, line);) {
    if (line.rfind("Device Minor:", 0) == 0) minor = std::atoi(line.c_str() + 13);
  }
  std::vector<std::string> nodes;
  for (const std::string& node :
       {"/dev/nvidia" + std::to_string(minor), std::string("/dev/nvidiactl"),
        std::string("/dev/nvidia-uvm"), std::string("/dev/nvidia-uvm-tools"),
        std::string("/dev/nvidia-modeset")}) {
    if (::access(node.c_str(), F_OK) == 0) nodes.push_back(node);
  }
  return nodes;
}

}  // namespace kc::server
