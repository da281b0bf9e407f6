// NvmlLibrary: the few NVML entry points KCoral uses, resolved with dlopen at first use: the
// benchmark's GPU readings (src/native) and the server's census of a GPU's processes
// (pool/gpu_census.h).
//
// The build machines have no nvml.h, and linking libnvidia-ml would stop _native from loading
// where the driver is missing, so the types and functions are declared here (NVML's C ABI is
// stable: int return codes, opaque device handles, versioned names such as _v2) and the library
// is opened as "libnvidia-ml.so.1", the name the driver installs. Missing library, a failed
// nvmlInit_v2 or a missing required symbol are kUnavailable.
//
// Thread-safe: Get() loads and initialises once; the table is immutable after. NVML is never
// shut down (process lifetime).
#pragma once

#include <string>

#include "base/status.h"

namespace kc {

using NvmlReturn = int;  // nvmlReturn_t
inline constexpr NvmlReturn kNvmlSuccess = 0;
inline constexpr NvmlReturn kNvmlErrorNotSupported = 3;

using NvmlDevice = struct NvmlDeviceSt*;  // nvmlDevice_t

// nvmlClockType_t
enum class NvmlClock : int { kGraphics = 0, kSm = 1, kMem = 2 };
inline constexpr int kNvmlTemperatureGpu = 0;  // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU

// Buffer sizes from nvml.h (the _V2 sizes, which cover the older ones).
inline constexpr unsigned kNvmlUuidBufferSize = 96;
inline constexpr unsigned kNvmlNameBufferSize = 96;
inline constexpr unsigned kNvmlDriverVersionBufferSize = 80;

// nvmlProcessInfo_v2_t, the element nvmlDeviceGetComputeRunningProcesses_v3 fills.
struct NvmlProcessInfo {
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id;
  unsigned compute_instance_id;
};

// nvmlProcessUtilizationSample_t: one process's utilization over the driver's last sample
// period (about 200 ms on an H200), which ends at `timestamp_us` (CPU time, microseconds since
// the epoch). Percentages.
struct NvmlProcessUtilizationSample {
  unsigned pid;
  unsigned long long timestamp_us;
  unsigned sm_util, mem_util, enc_util, dec_util;
};

struct NvmlLibrary {
  using ErrorStringFn = const char* (*)(NvmlReturn);
  using DriverVersionFn = NvmlReturn (*)(char*, unsigned);
  using HandleByPciBusIdFn = NvmlReturn (*)(const char*, NvmlDevice*);
  using DeviceStringFn = NvmlReturn (*)(NvmlDevice, char*, unsigned);
  using ClockFn = NvmlReturn (*)(NvmlDevice, NvmlClock, unsigned*);
  using ReasonsFn = NvmlReturn (*)(NvmlDevice, unsigned long long*);
  using TemperatureFn = NvmlReturn (*)(NvmlDevice, int, unsigned*);
  using PowerFn = NvmlReturn (*)(NvmlDevice, unsigned*);  // milliwatts
  using ProcessesFn = NvmlReturn (*)(NvmlDevice, unsigned*, NvmlProcessInfo*);
  using HandleByUuidFn = NvmlReturn (*)(const char*, NvmlDevice*);
  using ProcessUtilizationFn = NvmlReturn (*)(NvmlDevice, NvmlProcessUtilizationSample*, unsigned*,
                                              unsigned long long);

  // Loaded and initialised once; kUnavailable (with the reason) where NVML cannot be used.
  static StatusOr<const NvmlLibrary*> Get();

  // Opens `path` (a soname or a file) and initialises it: Get()'s work, for tests that load a
  // fake NVML. The library stays loaded.
  static StatusOr<NvmlLibrary> Load(const char* path);

  // "Insufficient Permissions (4)"; never throws, never null-derefs.
  std::string ErrorText(NvmlReturn result) const;

  ErrorStringFn error_string = nullptr;
  DriverVersionFn system_get_driver_version = nullptr;
  HandleByPciBusIdFn device_get_handle_by_pci_bus_id = nullptr;  // the _v2 name
  DeviceStringFn device_get_uuid = nullptr;
  DeviceStringFn device_get_name = nullptr;
  ClockFn device_get_clock_info = nullptr;
  ClockFn device_get_applications_clock = nullptr;
  ClockFn device_get_default_applications_clock = nullptr;
  ClockFn device_get_max_clock_info = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons (drivers from 535), else the older
  // nvmlDeviceGetCurrentClocksThrottleReasons: same bits, same signature.
  ReasonsFn device_get_current_clocks_event_reasons = nullptr;
  TemperatureFn device_get_temperature = nullptr;
  PowerFn device_get_power_usage = nullptr;
  // nvmlDeviceGetComputeRunningProcesses_v3 (drivers from 510); null where the driver lacks it.
  ProcessesFn device_get_compute_running_processes = nullptr;
  HandleByUuidFn device_get_handle_by_uuid = nullptr;  // nvmlDeviceGetHandleByUUID; optional
  // nvmlDeviceGetProcessUtilization: the latest sample of each process with one newer than the
  // given timestamp; optional.
  ProcessUtilizationFn device_get_process_utilization = nullptr;
};

inline constexpr NvmlReturn kNvmlErrorNotFound = 6;  // e.g. no sample newer than asked
inline constexpr NvmlReturn kNvmlErrorInsufficientSize = 7;

}  // namespace kc
