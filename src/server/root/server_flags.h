// The `kcoral server` command line and environment, parsed into a ServerConfig and checked
// (spec/server.md §1.2). main() runs ParseServerFlags and either serves the config or exits
// with the code it says; what the flags cannot say alone is ValidateServerConfig's.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/core/server_config.h"

namespace kc::server {

// getenv, or a map in tests.
using Getenv = std::function<const char*(const char* name)>;

struct ParsedFlags {
  std::optional<ServerConfig> config;  // set: serve it
  int exit_code = 0;                   // else exit with this: 0 after --help, 2 for bad flags
};

// Parses `argv` and the environment. --help, and a flag CLI11 refuses, are printed as CLI11
// prints them (`out`, `err`); a config ValidateServerConfig refuses is one line on `err`,
// "kcoral server: <why>", and exit code 2. Notes that start nothing go to `err` too.
ParsedFlags ParseServerFlags(int argc, const char* const* argv, const Getenv& getenv,
                             std::ostream& out, std::ostream& err);

// The cross-checks of a parsed config: combinations that cannot run. `gpu_only_flags`: the
// GPU-only flags the command line gave (refused on a CPU server).
Status ValidateServerConfig(const ServerConfig& config,
                            const std::vector<std::string>& gpu_only_flags);

}  // namespace kc::server
