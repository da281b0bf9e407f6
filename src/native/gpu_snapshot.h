// GpuSnapshot: one NVML reading of a GPU's identity, clocks, clock-event (throttle) reasons,
// temperature and power, taken at the start and the end of a timed span (spec/benchmark.md §9.6,
// issue 9 "report the SM and memory clocks and throttle reasons at start and end").
//
// Pure data: filled by ReadGpuSnapshot (gpu_telemetry.h), compared by AddClockFindings
// (span_findings.h). A field NVML does not support on this GPU stays empty (JSON null); a field
// that failed for another reason is empty too and its error is in `errors`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc::native {

struct GpuSnapshot {
  int cuda_device = -1;
  std::string pci_bus_id;  // as CUDA names it, "0000:19:00.0"; the key into NVML
  std::string uuid;        // "GPU-5a1c..."
  std::string name;        // "NVIDIA H200"
  std::string driver_version;

  std::optional<uint32_t> sm_mhz;  // current clocks
  std::optional<uint32_t> mem_mhz;
  std::optional<uint32_t> app_sm_mhz;  // application clocks (the target under load)
  std::optional<uint32_t> app_mem_mhz;
  std::optional<uint32_t> default_app_sm_mhz;  // what the application clocks are out of the box
  std::optional<uint32_t> default_app_mem_mhz;
  std::optional<uint32_t> max_sm_mhz;
  std::optional<uint32_t> max_mem_mhz;

  // nvmlClocksEventReasons bits (clock_events.h names them).
  std::optional<uint64_t> clock_event_reasons;

  std::optional<uint32_t> temp_c;
  std::optional<double> power_w;

  // "power_w: Insufficient Permissions": fields that failed other than by being unsupported.
  std::vector<std::string> errors;
};

// Keys: cuda_device, pci_bus_id, uuid, name, driver_version, sm_mhz, mem_mhz, app_sm_mhz,
// app_mem_mhz, default_app_sm_mhz, default_app_mem_mhz, max_sm_mhz, max_mem_mhz,
// clock_event_reasons (the bitmask), throttle_reasons (its names), temp_c, power_w, errors.
// Empty optionals are null.
nlohmann::json ToJson(const GpuSnapshot& snapshot);

}  // namespace kc::native
