// What GPU code a shared library carries, read from the fatbins that nvcc links into its
// .nv_fatbin section: each entry is SASS for one architecture or PTX that the driver compiles
// for that architecture or a later one. A cluster sends a program to the GPU pool its uploaded
// library can run on (issue 26; cluster/pool_view.h).
//
//   for (const CudaCode& code : CudaCodeOf(library_bytes)) ... RunsOn(code, 90) ...
//
// Architectures are numbers as in their names: 90 for sm_90 (compute capability 9.0), 86 for
// sm_86, 100 for sm_100. The fatbin layout is nvcc's (checked against CUDA 13's nvcc for sm_80,
// sm_90, sm_90a, sm_100a, sm_100f, sm_120 and PTX; tests/unit/protocol/cuda_code_test.cc).
//
// Pure; a library that is not a 64-bit ELF, or has no fatbin, carries no code.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kc::protocol {

struct CudaCode {
  int arch = 0;
  char variant = 0;  // 'a': this architecture only; 'f': its family; 0: plain
  bool ptx = false;  // PTX, else SASS
  bool operator==(const CudaCode&) const = default;
};

// Every distinct entry of the library's fatbins, in the order first met.
std::vector<CudaCode> CudaCodeOf(std::string_view library);

// Whether `code` runs on a GPU of architecture `gpu`: SASS on the same major version at an equal
// or later minor one, PTX on any later architecture; an 'a' variant on its own architecture only,
// an 'f' variant within its major version.
bool RunsOn(const CudaCode& code, int gpu);

// "sm_90a" and "compute_90a" are 90; nullopt for anything not of the form (sm|compute)_<2-3
// digits>[a|f].
std::optional<int> ArchNumberOf(std::string_view name);

// "sm_90a", "compute_80".
std::string NameOf(const CudaCode& code);

}  // namespace kc::protocol
