#include "ipc/worker_settings.h"

#include <array>
#include <utility>

#include "protocol/json_fields.h"

namespace kc::ipc {
namespace {

// The wire's keys and texts: here and nowhere else.
constexpr char kDevice[] = "device";
constexpr char kCpuExecution[] = "cpu_execution";
constexpr char kAddressSpaceMbytes[] = "address_space_mbytes";
constexpr char kHeapBytes[] = "heap_bytes";
constexpr char kGpuArch[] = "gpu_arch";
constexpr char kMaxLibraries[] = "max_libraries";
constexpr char kPreload[] = "preload";

constexpr std::array<std::pair<WorkerDevice, std::string_view>, 2> kDevices = {{
    {WorkerDevice::kCpu, "cpu"},
    {WorkerDevice::kGpu, "gpu"},
}};
constexpr std::array<std::pair<CpuExecution, std::string_view>, 2> kCpuExecutions = {{
    {CpuExecution::kHost, "host"},
    {CpuExecution::kReference, "reference"},
}};

template <typename Mode, size_t N>
std::string_view TextIn(const std::array<std::pair<Mode, std::string_view>, N>& texts, Mode mode) {
  for (const auto& [known, text] : texts) {
    if (known == mode) return text;
  }
  return "";
}

// The mode `key` names, or an error naming the field; the default when it is missing.
template <typename Mode, size_t N>
Status ReadMode(const protocol::JsonFields& fields, const char* key,
                const std::array<std::pair<Mode, std::string_view>, N>& texts, Mode* out) {
  std::string text(TextIn(texts, *out));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(key, &text));
  for (const auto& [mode, known] : texts) {
    if (known == text) {
      *out = mode;
      return Status::Ok();
    }
  }
  return fields.Bad(key, "not a known value");
}

}  // namespace

std::string_view TextOf(WorkerDevice device) {
  return TextIn(kDevices, device);
}

std::string_view TextOf(CpuExecution execution) {
  return TextIn(kCpuExecutions, execution);
}

nlohmann::json Encode(const WorkerSettings& settings) {
  nlohmann::json json = {
      {kDevice, TextOf(settings.device)},
      {kCpuExecution, TextOf(settings.cpu_execution)},
      {kAddressSpaceMbytes, settings.address_space_mbytes},
      {kHeapBytes, settings.heap_bytes},
      {kGpuArch, settings.gpu_arch},
      {kMaxLibraries, settings.max_libraries},
  };
  if (settings.preload) json[kPreload] = *settings.preload;
  return json;
}

StatusOr<WorkerSettings> DecodeWorkerSettings(const nlohmann::json& json) {
  protocol::JsonFields fields(json, "worker settings");
  KC_RETURN_IF_ERROR(fields.IsObject());
  WorkerSettings settings;
  KC_RETURN_IF_ERROR(ReadMode(fields, kDevice, kDevices, &settings.device));
  KC_RETURN_IF_ERROR(ReadMode(fields, kCpuExecution, kCpuExecutions, &settings.cpu_execution));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(kAddressSpaceMbytes, &settings.address_space_mbytes));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(kHeapBytes, &settings.heap_bytes));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(kGpuArch, &settings.gpu_arch));
  KC_RETURN_IF_ERROR(fields.ReadIfPresent(kMaxLibraries, &settings.max_libraries));
  KC_RETURN_IF_ERROR(fields.Read(kPreload, &settings.preload));
  return settings;
}

}  // namespace kc::ipc
