#include "protocol/cuda_code.h"

#include <elf.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kc::protocol {

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint16_t kPtxEntry = 1;
constexpr uint16_t kSassEntry = 2;
constexpr uint64_t kArchSpecificFlag = 0x100000;    // sm_90a
constexpr uint64_t kFamilySpecificFlag = 0x200000;  // sm_100f

// A little-endian value at `at`, if the bytes are there.
template <class T>
std::optional<T> Read(std::string_view bytes, uint64_t at) {
  if (at > bytes.size() || bytes.size() - at < sizeof(T)) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  return value;
}

// The .nv_fatbin section's bytes; empty when there is none.
std::string_view FatbinSection(std::string_view elf) {
  auto header = Read<Elf64_Ehdr>(elf, 0);
  if (!header || std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
      header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_shentsize != sizeof(Elf64_Shdr)) {
    return {};
  }
  auto section = [&](uint64_t index) {
    return Read<Elf64_Shdr>(elf, header->e_shoff + index * sizeof(Elf64_Shdr));
  };
  auto names = section(header->e_shstrndx);
  if (!names) return {};
  for (uint64_t index = 0; index < header->e_shnum; ++index) {
    auto entry = section(index);
    if (!entry || entry->sh_type == SHT_NOBITS) continue;
    const uint64_t name_at = names->sh_offset + entry->sh_name;
    constexpr std::string_view kName = ".nv_fatbin";
    if (name_at >= elf.size() || elf.substr(name_at, kName.size() + 1) != std::string(kName) + '\0')
      continue;
    if (entry->sh_offset > elf.size() || elf.size() - entry->sh_offset < entry->sh_size) return {};
    return elf.substr(entry->sh_offset, entry->sh_size);
  }
  return {};
}

}  // namespace

std::vector<CudaCode> CudaCodeOf(std::string_view library) {
  const std::string_view fatbins = FatbinSection(library);
  std::vector<CudaCode> found;
  // The section holds fatbins one after another (one per linked object), each a header (magic,
  // version, header size, size of its entries) and entries (kind, header size, payload size;
  // the architecture at +28, flags at +40).
  uint64_t at = 0;
  while (auto magic = Read<uint32_t>(fatbins, at)) {
    auto header_size = Read<uint16_t>(fatbins, at + 6);
    auto entries_size = Read<uint64_t>(fatbins, at + 8);
    if (*magic != kFatbinMagic || !header_size || !entries_size) break;
    const uint64_t end = at + *header_size + *entries_size;
    if (end > fatbins.size() || end < at) break;
    for (uint64_t entry = at + *header_size; entry < end;) {
      auto kind = Read<uint16_t>(fatbins, entry);
      auto entry_header = Read<uint32_t>(fatbins, entry + 4);
      auto payload = Read<uint64_t>(fatbins, entry + 8);
      auto arch = Read<uint32_t>(fatbins, entry + 28);
      auto flags = Read<uint64_t>(fatbins, entry + 40);
      if (!kind || !entry_header || !payload || !arch || !flags || *entry_header < 48) break;
      if (*kind == kPtxEntry || *kind == kSassEntry) {
        CudaCode code{static_cast<int>(*arch),
                      (*flags & kArchSpecificFlag)     ? 'a'
                      : (*flags & kFamilySpecificFlag) ? 'f'
                                                       : '\0',
                      *kind == kPtxEntry};
        if (std::find(found.begin(), found.end(), code) == found.end()) found.push_back(code);
      }
      if (*payload > end - entry - *entry_header) break;
      entry += *entry_header + *payload;
    }
    at = end;
  }
  return found;
}

bool RunsOn(const CudaCode& code, int gpu) {
  const bool same_major = gpu / 10 == code.arch / 10;
  if (code.variant == 'a') return gpu == code.arch;
  if (code.variant == 'f' || !code.ptx) return same_major && gpu >= code.arch;
  return gpu >= code.arch;
}

std::optional<int> ArchNumberOf(std::string_view name) {
  for (std::string_view prefix : {"sm_", "compute_"}) {
    if (!name.starts_with(prefix)) continue;
    std::string_view digits = name.substr(prefix.size());
    if (digits.ends_with('a') || digits.ends_with('f')) digits.remove_suffix(1);
    if (digits.size() < 2 || digits.size() > 3 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    return std::stoi(std::string(digits));
  }
  return std::nullopt;
}

std::string NameOf(const CudaCode& code) {
  std::string name = (code.ptx ? "compute_" : "sm_") + std::to_string(code.arch);
  if (code.variant != 0) name += code.variant;
  return name;
}

}  // namespace kc::protocol
