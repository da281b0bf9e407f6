#include "base/nvml_library.h"

#include <dlfcn.h>

namespace kc {
namespace {

constexpr const char* kLibraryName = "libnvidia-ml.so.1";

template <typename Fn>
bool Resolve(void* handle, const char* symbol, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return out != nullptr;
}

}  // namespace

StatusOr<NvmlLibrary> NvmlLibrary::Load(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return UnavailableError(std::string("NVML is unavailable: ") + (why ? why : path));
  }
  // The handle stays open for the process's life.
  NvmlLibrary nvml;
  using InitFn = NvmlReturn (*)();
  InitFn init = nullptr;
  bool resolved =
      Resolve(handle, "nvmlInit_v2", init) &&
      Resolve(handle, "nvmlErrorString", nvml.error_string) &&
      Resolve(handle, "nvmlSystemGetDriverVersion", nvml.system_get_driver_version) &&
      Resolve(handle, "nvmlDeviceGetHandleByPciBusId_v2", nvml.device_get_handle_by_pci_bus_id) &&
      Resolve(handle, "nvmlDeviceGetUUID", nvml.device_get_uuid) &&
      Resolve(handle, "nvmlDeviceGetName", nvml.device_get_name) &&
      Resolve(handle, "nvmlDeviceGetClockInfo", nvml.device_get_clock_info) &&
      Resolve(handle, "nvmlDeviceGetApplicationsClock", nvml.device_get_applications_clock) &&
      Resolve(handle, "nvmlDeviceGetDefaultApplicationsClock",
              nvml.device_get_default_applications_clock) &&
      Resolve(handle, "nvmlDeviceGetMaxClockInfo", nvml.device_get_max_clock_info) &&
      Resolve(handle, "nvmlDeviceGetTemperature", nvml.device_get_temperature) &&
      Resolve(handle, "nvmlDeviceGetPowerUsage", nvml.device_get_power_usage);
  if (!resolved) {
    const char* why = dlerror();
    return UnavailableError(std::string("NVML is unavailable: ") +
                            (why ? why : "a required symbol is missing"));
  }
  if (!Resolve(handle, "nvmlDeviceGetCurrentClocksEventReasons",
               nvml.device_get_current_clocks_event_reasons) &&
      !Resolve(handle, "nvmlDeviceGetCurrentClocksThrottleReasons",
               nvml.device_get_current_clocks_event_reasons)) {
    return UnavailableError(
        "NVML is unavailable: neither nvmlDeviceGetCurrentClocksEventReasons "
        "nor nvmlDeviceGetCurrentClocksThrottleReasons is exported");
  }
  Resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3",
          nvml.device_get_compute_running_processes);                            // optional
  Resolve(handle, "nvmlDeviceGetHandleByUUID", nvml.device_get_handle_by_uuid);  // optional
  Resolve(handle, "nvmlDeviceGetProcessUtilization",
          nvml.device_get_process_utilization);  // optional
  NvmlReturn initialized = init();
  if (initialized != kNvmlSuccess) {
    return UnavailableError("NVML is unavailable: nvmlInit_v2: " + nvml.ErrorText(initialized));
  }
  return nvml;
}

StatusOr<const NvmlLibrary*> NvmlLibrary::Get() {
  // Leaked on purpose: NVML stays initialised until exit (see the header).
  static const StatusOr<NvmlLibrary>* loaded = new StatusOr<NvmlLibrary>(Load(kLibraryName));
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

std::string NvmlLibrary::ErrorText(NvmlReturn result) const {
  const char* text = error_string != nullptr ? error_string(result) : nullptr;
  return std::string(text != nullptr ? text : "unknown NVML error") + " (" +
         std::to_string(result) + ")";
}

}  // namespace kc
