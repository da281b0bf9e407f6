#include "native/nvml_snapshot.h"

#include <optional>
#include <string>

namespace kc::native {
namespace {

// Records a field's value, or the reason it has none. Unsupported is not an error: not every GPU
// reports every field (application clocks on consumer parts, for one).
template <typename T>
void Keep(const NvmlLibrary& nvml, const char* field, NvmlReturn result, T value,
          std::optional<T>& out, GpuSnapshot& snapshot) {
  if (result == kNvmlSuccess) {
    out = value;
  } else if (result != kNvmlErrorNotSupported) {
    snapshot.errors.push_back(std::string(field) + ": " + nvml.ErrorText(result));
  }
}

void ReadClock(const NvmlLibrary& nvml, NvmlLibrary::ClockFn fn, NvmlDevice device, NvmlClock clock,
               const char* field, std::optional<uint32_t>& out, GpuSnapshot& snapshot) {
  unsigned mhz = 0;
  NvmlReturn result = fn(device, clock, &mhz);
  Keep<uint32_t>(nvml, field, result, mhz, out, snapshot);
}

std::string ReadString(const NvmlLibrary& nvml, NvmlLibrary::DeviceStringFn fn, NvmlDevice device,
                       const char* field, GpuSnapshot& snapshot) {
  char text[kNvmlUuidBufferSize > kNvmlNameBufferSize ? kNvmlUuidBufferSize : kNvmlNameBufferSize] =
      {};
  NvmlReturn result = fn(device, text, sizeof text);
  if (result == kNvmlSuccess) return text;
  if (result != kNvmlErrorNotSupported) {
    snapshot.errors.push_back(std::string(field) + ": " + nvml.ErrorText(result));
  }
  return "";
}

void ReadClocks(const NvmlLibrary& nvml, NvmlDevice device, GpuSnapshot& s) {
  ReadClock(nvml, nvml.device_get_clock_info, device, NvmlClock::kSm, "sm_mhz", s.sm_mhz, s);
  ReadClock(nvml, nvml.device_get_clock_info, device, NvmlClock::kMem, "mem_mhz", s.mem_mhz, s);
  ReadClock(nvml, nvml.device_get_applications_clock, device, NvmlClock::kSm, "app_sm_mhz",
            s.app_sm_mhz, s);
  ReadClock(nvml, nvml.device_get_applications_clock, device, NvmlClock::kMem, "app_mem_mhz",
            s.app_mem_mhz, s);
  ReadClock(nvml, nvml.device_get_default_applications_clock, device, NvmlClock::kSm,
            "default_app_sm_mhz", s.default_app_sm_mhz, s);
  ReadClock(nvml, nvml.device_get_default_applications_clock, device, NvmlClock::kMem,
            "default_app_mem_mhz", s.default_app_mem_mhz, s);
  ReadClock(nvml, nvml.device_get_max_clock_info, device, NvmlClock::kSm, "max_sm_mhz",
            s.max_sm_mhz, s);
  ReadClock(nvml, nvml.device_get_max_clock_info, device, NvmlClock::kMem, "max_mem_mhz",
            s.max_mem_mhz, s);
}

void ReadState(const NvmlLibrary& nvml, NvmlDevice device, GpuSnapshot& s) {
  unsigned long long reasons = 0;
  NvmlReturn result = nvml.device_get_current_clocks_event_reasons(device, &reasons);
  Keep<uint64_t>(nvml, "clock_event_reasons", result, reasons, s.clock_event_reasons, s);

  unsigned temp_c = 0;
  result = nvml.device_get_temperature(device, kNvmlTemperatureGpu, &temp_c);
  Keep<uint32_t>(nvml, "temp_c", result, temp_c, s.temp_c, s);

  unsigned milliwatts = 0;
  result = nvml.device_get_power_usage(device, &milliwatts);
  Keep<double>(nvml, "power_w", result, milliwatts / 1000.0, s.power_w, s);
}

}  // namespace

StatusOr<GpuSnapshot> ReadNvmlSnapshot(const NvmlLibrary& nvml, const std::string& pci_bus_id) {
  GpuSnapshot snapshot;
  snapshot.pci_bus_id = pci_bus_id;
  NvmlDevice device = nullptr;
  NvmlReturn found = nvml.device_get_handle_by_pci_bus_id(pci_bus_id.c_str(), &device);
  if (found != kNvmlSuccess) {
    return UnavailableError("NVML does not know the GPU at PCI bus id " + pci_bus_id +
                            ": nvmlDeviceGetHandleByPciBusId_v2: " + nvml.ErrorText(found));
  }
  snapshot.uuid = ReadString(nvml, nvml.device_get_uuid, device, "uuid", snapshot);
  snapshot.name = ReadString(nvml, nvml.device_get_name, device, "name", snapshot);
  char driver[kNvmlDriverVersionBufferSize] = {};
  NvmlReturn result = nvml.system_get_driver_version(driver, sizeof driver);
  if (result == kNvmlSuccess) {
    snapshot.driver_version = driver;
  } else {
    snapshot.errors.push_back("driver_version: " + nvml.ErrorText(result));
  }
  ReadClocks(nvml, device, snapshot);
  ReadState(nvml, device, snapshot);
  return snapshot;
}

}  // namespace kc::native
