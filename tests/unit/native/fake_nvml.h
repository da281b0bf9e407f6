// The state of the fake libnvidia-ml (fake_nvml.cc), which tests reach with dlsym on the handle
// NvmlLibrary::Load opened: set a field, and the next ReadNvmlSnapshot reads it through the real
// NVML code path. `fake_nvml = FakeNvml{}` puts every field back to its default.
#pragma once

#include <dlfcn.h>

extern "C" {

struct FakeNvml {
  int init_result = 0;
  char bus_id[32] = "00000000:19:00.0";  // the one device NVML knows
  int field_result = 0;                  // returned by every per-field query
  int power_result = 0;                  // returned by nvmlDeviceGetPowerUsage
  unsigned sm_mhz = 1980, mem_mhz = 3201, app_sm_mhz = 1980, app_mem_mhz = 3201;
  unsigned max_sm_mhz = 1980, max_mem_mhz = 3201, temp_c = 41, power_mw = 123456;
  unsigned long long reasons = 0x5;  // gpu idle | sw power cap
  int reasons_calls = 0;
  int throttle_calls = 0;
};

}  // extern "C"

// The fake library's state at `path` (KC_FAKE_NVML or KC_FAKE_NVML_OLD, CMakeLists.txt), or
// nullptr when it cannot be opened. The handle is kept open, so the state lives on.
inline FakeNvml* FakeNvmlAt(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  return handle == nullptr ? nullptr : static_cast<FakeNvml*>(dlsym(handle, "fake_nvml"));
}
