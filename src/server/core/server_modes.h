// The server's modes: one enum per mode flag (--device, --housekeeping,
// --sandbox, --sandbox-network, --cpu-execution), parsed once where the flags
// are read (main.cc) so the rest of the server compares enums, never strings.
// Each flag has one table of the texts it accepts, in --help order; the first
// text of a value is the one shown (/health, the event log), later ones are
// aliases (--sandbox bubblewrap, the reference's name for namespaces).
//
//   std::string text = "gpu";                              // bound to --device
//   cli.add_option("--device", text)->check(CLI::IsMember(FlagTexts(kDeviceFlag)));
//   config.device = ParseFlag(kDeviceFlag, text).value();  // after cli.parse
//   health["device"] = FlagText(config.device);            // "gpu"
//
// Constants and pure functions: thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "pool/gpu_arbiter.h"

namespace kc::server {

enum class Device { kCpu, kGpu };               // cpu: compile server; gpu: execution server
enum class SandboxMode { kNamespaces, kNone };  // worker isolation (pool/worker_setup.h)
enum class SandboxNetwork { kNone, kHost };     // a sandboxed worker's network
enum class CpuExecution {
  kHost,
  kReference
};  // CPU servers: run uploads, or refuse as the
    // reference does
// --housekeeping parses into pool::HousekeepingPolicy (gpu_arbiter.h).

// One text a mode flag accepts, and the value it means.
template <typename Mode>
struct FlagValue {
  std::string_view text;
  Mode mode;
};

inline constexpr FlagValue<Device> kDeviceFlag[] = {{"cpu", Device::kCpu}, {"gpu", Device::kGpu}};
inline constexpr FlagValue<pool::HousekeepingPolicy> kHousekeepingFlag[] = {
    {"outside-spans", pool::HousekeepingPolicy::kOutsideSpans},
    {"contexts-beside-spans", pool::HousekeepingPolicy::kContextsBesideSpans},
    {"beside-spans", pool::HousekeepingPolicy::kBesideSpans}};
inline constexpr FlagValue<SandboxMode> kSandboxFlag[] = {{"namespaces", SandboxMode::kNamespaces},
                                                          {"bubblewrap", SandboxMode::kNamespaces},
                                                          {"none", SandboxMode::kNone}};
inline constexpr FlagValue<SandboxNetwork> kSandboxNetworkFlag[] = {
    {"none", SandboxNetwork::kNone}, {"host", SandboxNetwork::kHost}};
inline constexpr FlagValue<CpuExecution> kCpuExecutionFlag[] = {
    {"host", CpuExecution::kHost}, {"reference", CpuExecution::kReference}};

// The value `text` means, or nullopt if the flag does not accept it.
template <typename Mode, size_t N>
std::optional<Mode> ParseFlag(const FlagValue<Mode> (&values)[N], std::string_view text) {
  for (const FlagValue<Mode>& value : values) {
    if (value.text == text) return value.mode;
  }
  return std::nullopt;
}

// Every text the flag accepts, in --help order (for CLI::IsMember).
template <typename Mode, size_t N>
std::vector<std::string> FlagTexts(const FlagValue<Mode> (&values)[N]) {
  std::vector<std::string> texts;
  for (const FlagValue<Mode>& value : values)
    texts.emplace_back(value.text);
  return texts;
}

// The text `mode` is shown as: its first in `values`.
template <typename Mode, size_t N>
std::string_view FlagTextIn(const FlagValue<Mode> (&values)[N], Mode mode) {
  for (const FlagValue<Mode>& value : values) {
    if (value.mode == mode) return value.text;
  }
  KC_CHECK(false);  // a value missing from its flag's table: a bug here
  return {};
}

inline std::string_view FlagText(Device mode) {
  return FlagTextIn(kDeviceFlag, mode);
}
inline std::string_view FlagText(pool::HousekeepingPolicy mode) {
  return FlagTextIn(kHousekeepingFlag, mode);
}
inline std::string_view FlagText(SandboxMode mode) {
  return FlagTextIn(kSandboxFlag, mode);
}
inline std::string_view FlagText(SandboxNetwork mode) {
  return FlagTextIn(kSandboxNetworkFlag, mode);
}
inline std::string_view FlagText(CpuExecution mode) {
  return FlagTextIn(kCpuExecutionFlag, mode);
}

}  // namespace kc::server
