// GpuTelemetry: a live NVML reading of each of the server's GPUs for the dashboard (issue 28):
// SM and memory clocks (current and maximum), clock-event (throttle) reasons, temperature and
// power. The same readings a benchmark takes around its timed span (native/gpu_snapshot.h), here
// taken by the server, at most once per dashboard snapshot (status_board.h), never per viewer.
//
// The throttle reasons are NVML's bitmask; the page names the bits (nvmlClocksEventReasons, as
// native/clock_events.h does). Where NVML cannot be loaded or a GPU not found, each reading
// says why in "error" and the rest of the dashboard works on.
//
// Thread-safe: reads only; NVML calls are thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc::server {

class GpuTelemetry {
 public:
  struct Gpu {
    int index = 0;
    std::string uuid;  // "GPU-...", how NVML finds it
  };
  explicit GpuTelemetry(std::vector<Gpu> gpus) : gpus_(std::move(gpus)) {}

  // One object per GPU: gpu, uuid, name, sm_mhz, mem_mhz, max_sm_mhz, max_mem_mhz, temp_c,
  // power_w, clock_event_reasons; a field NVML did not give is null; "error" says why, if any.
  nlohmann::json Read() const;

 private:
  const std::vector<Gpu> gpus_;
};

}  // namespace kc::server
