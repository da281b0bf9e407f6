#include "server/status/gpu_telemetry.h"

#include "base/nvml_library.h"

namespace kc::server {

namespace {

nlohmann::json Clock(const NvmlLibrary& nvml, NvmlLibrary::ClockFn fn, NvmlDevice device,
                     NvmlClock clock) {
  unsigned mhz = 0;
  if (fn == nullptr || fn(device, clock, &mhz) != kNvmlSuccess) return nullptr;
  return mhz;
}

nlohmann::json ReadOne(const NvmlLibrary& nvml, NvmlDevice device) {
  nlohmann::json out;
  char name[kNvmlNameBufferSize] = {};
  out["name"] = nvml.device_get_name(device, name, sizeof name) == kNvmlSuccess
                    ? nlohmann::json(name)
                    : nlohmann::json(nullptr);
  out["sm_mhz"] = Clock(nvml, nvml.device_get_clock_info, device, NvmlClock::kSm);
  out["mem_mhz"] = Clock(nvml, nvml.device_get_clock_info, device, NvmlClock::kMem);
  out["max_sm_mhz"] = Clock(nvml, nvml.device_get_max_clock_info, device, NvmlClock::kSm);
  out["max_mem_mhz"] = Clock(nvml, nvml.device_get_max_clock_info, device, NvmlClock::kMem);
  unsigned temp_c = 0, milliwatts = 0;
  unsigned long long reasons = 0;
  out["temp_c"] = nvml.device_get_temperature(device, kNvmlTemperatureGpu, &temp_c) == kNvmlSuccess
                      ? nlohmann::json(temp_c)
                      : nlohmann::json(nullptr);
  out["power_w"] = nvml.device_get_power_usage(device, &milliwatts) == kNvmlSuccess
                       ? nlohmann::json(milliwatts / 1000.0)
                       : nlohmann::json(nullptr);
  out["clock_event_reasons"] =
      nvml.device_get_current_clocks_event_reasons(device, &reasons) == kNvmlSuccess
          ? nlohmann::json(reasons)
          : nlohmann::json(nullptr);
  return out;
}

}  // namespace

nlohmann::json GpuTelemetry::Read() const {
  nlohmann::json out = nlohmann::json::array();
  if (gpus_.empty()) return out;
  StatusOr<const NvmlLibrary*> nvml = NvmlLibrary::Get();
  for (const Gpu& gpu : gpus_) {
    nlohmann::json reading = {{"gpu", gpu.index}, {"uuid", gpu.uuid}};
    NvmlDevice device = nullptr;
    if (!nvml.ok()) {
      reading["error"] = nvml.status().message();
    } else if ((*nvml)->device_get_handle_by_uuid == nullptr ||
               (*nvml)->device_get_handle_by_uuid(gpu.uuid.c_str(), &device) != kNvmlSuccess) {
      reading["error"] = "NVML does not know " + gpu.uuid;
    } else {
      reading.update(ReadOne(**nvml, device));
    }
    out.push_back(std::move(reading));
  }
  return out;
}

}  // namespace kc::server
