#include "native/gpu_snapshot.h"

#include "native/clock_events.h"

namespace kc::native {
namespace {

template <typename T>
nlohmann::json OrNull(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json ToJson(const GpuSnapshot& snapshot) {
  nlohmann::json out = {
      {"cuda_device", snapshot.cuda_device},
      {"pci_bus_id", snapshot.pci_bus_id},
      {"uuid", snapshot.uuid},
      {"name", snapshot.name},
      {"driver_version", snapshot.driver_version},
      {"sm_mhz", OrNull(snapshot.sm_mhz)},
      {"mem_mhz", OrNull(snapshot.mem_mhz)},
      {"app_sm_mhz", OrNull(snapshot.app_sm_mhz)},
      {"app_mem_mhz", OrNull(snapshot.app_mem_mhz)},
      {"default_app_sm_mhz", OrNull(snapshot.default_app_sm_mhz)},
      {"default_app_mem_mhz", OrNull(snapshot.default_app_mem_mhz)},
      {"max_sm_mhz", OrNull(snapshot.max_sm_mhz)},
      {"max_mem_mhz", OrNull(snapshot.max_mem_mhz)},
      {"clock_event_reasons", OrNull(snapshot.clock_event_reasons)},
      {"throttle_reasons", nullptr},
      {"temp_c", OrNull(snapshot.temp_c)},
      {"power_w", OrNull(snapshot.power_w)},
      {"errors", snapshot.errors},
  };
  if (snapshot.clock_event_reasons) {
    out["throttle_reasons"] = ClockEventReasonNames(*snapshot.clock_event_reasons);
  }
  return out;
}

}  // namespace kc::native
