// A fake libnvidia-ml for the native unit tests: the NVML entry points NvmlLibrary resolves,
// answering from FakeNvml (fake_nvml.h), which a test reaches with dlsym on the same handle.
// The default application clocks are fixed at 1980 / 3201 MHz. Built twice:
// with KC_FAKE_NVML_THROTTLE_ONLY it exports only the older
// nvmlDeviceGetCurrentClocksThrottleReasons, as drivers before 535 do.
#include "fake_nvml.h"

#include <cstring>

extern "C" {

__attribute__((visibility("default"))) FakeNvml fake_nvml;

namespace {
struct DeviceSt {
} the_device;
}  // namespace

using nvmlDevice_t = DeviceSt*;

#define KC_FAKE_EXPORT __attribute__((visibility("default")))

KC_FAKE_EXPORT int nvmlInit_v2() {
  return fake_nvml.init_result;
}

KC_FAKE_EXPORT const char* nvmlErrorString(int result) {
  return result == 4 ? "Insufficient Permissions" : result == 3 ? "Not Supported" : "Fake Error";
}

KC_FAKE_EXPORT int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  std::strncpy(version, "580.95.05", length);
  return 0;
}

KC_FAKE_EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, nvmlDevice_t* device) {
  if (std::strcmp(bus_id, fake_nvml.bus_id) != 0) return 6;  // NVML_ERROR_NOT_FOUND
  *device = &the_device;
  return 0;
}

KC_FAKE_EXPORT int nvmlDeviceGetUUID(nvmlDevice_t, char* uuid, unsigned length) {
  std::strncpy(uuid, "GPU-00000000-1111-2222-3333-444444444444", length);
  return 0;
}

KC_FAKE_EXPORT int nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned length) {
  std::strncpy(name, "NVIDIA H200", length);
  return 0;
}

static int Clock(int type, unsigned sm, unsigned mem, unsigned* out) {
  if (fake_nvml.field_result != 0) return fake_nvml.field_result;
  *out = type == 1 ? sm : mem;  // NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2
  return 0;
}

KC_FAKE_EXPORT int nvmlDeviceGetClockInfo(nvmlDevice_t, int type, unsigned* mhz) {
  return Clock(type, fake_nvml.sm_mhz, fake_nvml.mem_mhz, mhz);
}
KC_FAKE_EXPORT int nvmlDeviceGetApplicationsClock(nvmlDevice_t, int type, unsigned* mhz) {
  return Clock(type, fake_nvml.app_sm_mhz, fake_nvml.app_mem_mhz, mhz);
}
KC_FAKE_EXPORT int nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t, int type, unsigned* mhz) {
  return Clock(type, 1980, 3201, mhz);
}
KC_FAKE_EXPORT int nvmlDeviceGetMaxClockInfo(nvmlDevice_t, int type, unsigned* mhz) {
  return Clock(type, fake_nvml.max_sm_mhz, fake_nvml.max_mem_mhz, mhz);
}

#ifndef KC_FAKE_NVML_THROTTLE_ONLY
KC_FAKE_EXPORT int nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t,
                                                          unsigned long long* reasons) {
  ++fake_nvml.reasons_calls;
  *reasons = fake_nvml.reasons;
  return fake_nvml.field_result;
}
#endif

KC_FAKE_EXPORT int nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t,
                                                             unsigned long long* reasons) {
  ++fake_nvml.throttle_calls;
  *reasons = fake_nvml.reasons;
  return fake_nvml.field_result;
}

KC_FAKE_EXPORT int nvmlDeviceGetTemperature(nvmlDevice_t, int sensor, unsigned* temp_c) {
  if (sensor != 0) return 2;  // only NVML_TEMPERATURE_GPU
  *temp_c = fake_nvml.temp_c;
  return fake_nvml.field_result;
}

KC_FAKE_EXPORT int nvmlDeviceGetPowerUsage(nvmlDevice_t, unsigned* milliwatts) {
  *milliwatts = fake_nvml.power_mw;
  return fake_nvml.power_result;
}

}  // extern "C"
