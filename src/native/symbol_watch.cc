#include "native/symbol_watch.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string_view>

namespace kc::native {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
#else
#error "symbol_watch: the GOT relocation types of this architecture are not known"
#endif

// The readable address ranges of this process, from /proc/self/maps: the only way to ask
// "may I read this?" that the worker's seccomp filter allows (process_vm_readv is denied).
// A page unmapped between this reading and the read is a race only an attacker makes, and it
// ends in a crash, which fails the benchmark rather than hiding anything.
class ReadableMemory {
 public:
  ReadableMemory() {
    const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error_ = std::strerror(errno);
      return;
    }
    std::string text;
    char chunk[16384];
    for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) > 0;)
      text.append(chunk, n);
    close(fd);
    // "begin-end perms offset dev inode path", one mapping a line, in address order. Parsed
    // by hand: sscanf doubled the cost of a check in a torch worker's 600 mappings.
    for (std::string_view rest = text; !rest.empty();) {
      const size_t eol = std::min(rest.find('\n'), rest.size());
      const std::string_view line = rest.substr(0, eol);
      rest.remove_prefix(std::min(eol + 1, rest.size()));
      uintptr_t begin = 0, end = 0;
      const char* last = line.data() + line.size();
      auto [dash, e1] = std::from_chars(line.data(), last, begin, 16);
      if (e1 != std::errc() || dash == last || *dash != '-') continue;
      auto [space, e2] = std::from_chars(dash + 1, last, end, 16);
      if (e2 == std::errc() && last - space >= 2 && space[1] == 'r')
        ranges_.emplace_back(begin, end);
    }
  }

  // Empty when the map was read; else why not (EMFILE: the process ran out of descriptors).
  const std::string& error() const { return error_; }

  bool Covers(uintptr_t address, size_t length) const {
    uintptr_t from = address;
    const uintptr_t to = address + length;
    if (to < from) return false;
    for (const auto& [begin, end] : ranges_) {  // by address, as maps lists them
      if (end <= from) continue;
      if (begin > from) return false;
      from = end;
      if (from >= to) return true;
    }
    return false;
  }

  // Copies `length` bytes at `address` when they are all readable.
  bool Read(uintptr_t address, void* out, size_t length) const {
    if (!Covers(address, length)) return false;
    std::memcpy(out, reinterpret_cast<const void*>(address), length);
    return true;
  }

 private:
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges_;
  std::string error_;
};

std::string Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string Hex(uintptr_t value) {
  char text[2 + 16 + 1];
  std::snprintf(text, sizeof text, "0x%" PRIxPTR, value);
  return text;
}

std::string HexBytes(const uint8_t* bytes, size_t length) {
  std::string out;
  for (size_t i = 0; i < length; ++i) {
    char text[4];
    std::snprintf(text, sizeof text, i == 0 ? "%02x" : " %02x", bytes[i]);
    out += text;
  }
  return out;
}

// "0x7f... (cuptiActivityEnable in libcupti.so.13)", or "(anonymous memory)" where no loaded
// object holds the address: where a redirected slot now leads.
std::string DescribeAddress(uintptr_t address) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(address), &info) == 0 || info.dli_fname == nullptr) {
    return Hex(address) + " (anonymous memory)";
  }
  std::string where = Basename(info.dli_fname);
  if (where.empty()) where = "the main program";
  if (info.dli_sname != nullptr && reinterpret_cast<uintptr_t>(info.dli_saddr) == address) {
    return Hex(address) + " (" + info.dli_sname + " in " + where + ")";
  }
  return Hex(address) + " (in " + where + ")";
}

// A loaded object as dl_iterate_phdr shows it.
struct LoadedModule {
  std::string path;  // empty for the main program
  uintptr_t bias = 0;
  const ElfW(Dyn) * dynamic = nullptr;
  std::vector<std::pair<uintptr_t, uintptr_t>> segments;  // PT_LOAD, [begin, end)

  bool Contains(uintptr_t address) const {
    return std::any_of(segments.begin(), segments.end(),
                       [&](const auto& s) { return address >= s.first && address < s.second; });
  }
  // A d_ptr of the dynamic section as an address: glibc relocates most of them in place, other
  // loaders (and read-only dynamic sections) leave them as offsets from the load bias.
  uintptr_t Address(uintptr_t d_ptr) const {
    if (Contains(d_ptr)) return d_ptr;
    return Contains(d_ptr + bias) ? d_ptr + bias : 0;
  }
  std::string Name() const { return path.empty() ? "the main program" : Basename(path); }
};

std::vector<LoadedModule> LoadedModules() {
  std::vector<LoadedModule> modules;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        LoadedModule module;
        module.path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        module.bias = info->dlpi_addr;
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& header = info->dlpi_phdr[i];
          const uintptr_t begin = info->dlpi_addr + header.p_vaddr;
          if (header.p_type == PT_LOAD) module.segments.emplace_back(begin, begin + header.p_memsz);
          if (header.p_type == PT_DYNAMIC) module.dynamic = reinterpret_cast<ElfW(Dyn)*>(begin);
        }
        static_cast<std::vector<LoadedModule>*>(data)->push_back(std::move(module));
        return 0;
      },
      &modules);
  return modules;
}

// The dynamic section's tables that name a module's imports; zero where a tag is missing.
struct ImportTables {
  uintptr_t jmprel = 0, pltrelsz = 0, rela = 0, relasz = 0, symtab = 0, strtab = 0, strsz = 0;
};

ImportTables ReadImportTables(const LoadedModule& module) {
  ImportTables t;
  for (const ElfW(Dyn)* d = module.dynamic; d != nullptr && d->d_tag != DT_NULL; ++d) {
    const uintptr_t value = d->d_un.d_val;
    if (d->d_tag == DT_JMPREL) t.jmprel = module.Address(value);
    if (d->d_tag == DT_PLTRELSZ) t.pltrelsz = value;
    if (d->d_tag == DT_RELA) t.rela = module.Address(value);
    if (d->d_tag == DT_RELASZ) t.relasz = value;
    if (d->d_tag == DT_SYMTAB) t.symtab = module.Address(value);
    if (d->d_tag == DT_STRTAB) t.strtab = module.Address(value);
    if (d->d_tag == DT_STRSZ) t.strsz = value;
  }
  return t;
}

// Calls visit(name, slot address) for each JUMP_SLOT and GLOB_DAT relocation of `module`;
// false when it has no dynamic symbol table.
template <typename Visit>
bool ForEachImport(const LoadedModule& module, Visit visit) {
  const auto [jmprel, pltrelsz, rela, relasz, symtab, strtab, strsz] = ReadImportTables(module);
  if (symtab == 0 || strtab == 0) return false;
  const auto* symbols = reinterpret_cast<const ElfW(Sym)*>(symtab);
  const auto* strings = reinterpret_cast<const char*>(strtab);
  for (auto [table, bytes] : {std::pair{jmprel, pltrelsz}, std::pair{rela, relasz}}) {
    if (table == 0) continue;
    const auto* relocations = reinterpret_cast<const ElfW(Rela)*>(table);
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
      const uint32_t type = ELF64_R_TYPE(relocations[i].r_info);
      const uint32_t symbol = ELF64_R_SYM(relocations[i].r_info);
      if ((type != kJumpSlot && type != kGlobDat) || symbol == 0) continue;
      const ElfW(Word) name = symbols[symbol].st_name;
      if (name >= strsz) continue;
      visit(std::string_view(strings + name), module.bias + relocations[i].r_offset);
    }
  }
  return true;
}

bool HasPrefix(const std::string& name, const std::vector<std::string>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& p) { return name.compare(0, p.size(), p) == 0; });
}

void CheckCode(const std::vector<WatchedCode>& watched, const ReadableMemory& memory,
               std::vector<std::string>& findings) {
  for (const WatchedCode& code : watched) {
    std::array<uint8_t, kWatchedCodeBytes> now{};
    if (!memory.Read(code.address, now.data(), now.size())) {
      findings.push_back("the code of " + code.name + " in " + code.library +
                         " is no longer readable (unmapped, or its protection changed)");
    } else if (now != code.bytes) {
      findings.push_back("inline rewrite of " + code.name + " in " + code.library + ": its first " +
                         std::to_string(now.size()) +
                         " bytes of code changed since the worker started (now " +
                         HexBytes(now.data(), now.size()) + ")");
    }
  }
}

// A slot bound lazily since Record is fine when it holds the name's genuine definition.
void CheckSlots(const std::vector<WatchedSlot>& watched, const std::string& module,
                const ReadableMemory& memory, std::vector<std::string>& findings) {
  for (const WatchedSlot& slot : watched) {
    uintptr_t now = 0;
    if (!memory.Read(slot.slot, &now, sizeof now)) {
      findings.push_back("the GOT slot of " + slot.name + " in " + module +
                         " is no longer readable (unmapped, or its protection changed)");
    } else if (now != slot.target && !(slot.lazy && now == slot.binding)) {
      findings.push_back("the GOT slot of " + slot.name + " in " + module + " was redirected to " +
                         DescribeAddress(now) + "; it held " + DescribeAddress(slot.target) +
                         " when the worker started");
    }
  }
}

}  // namespace

void SymbolWatch::RecordCode(const std::vector<std::string>& names,
                             const std::vector<std::string>& library_prefixes) {
  std::set<std::string> unmatched(library_prefixes.begin(), library_prefixes.end());
  std::set<uintptr_t> seen;
  for (const WatchedCode& code : code_)
    seen.insert(code.address);
  const ReadableMemory memory;
  for (const LoadedModule& module : LoadedModules()) {
    const std::string file = Basename(module.path);
    if (module.path.empty() || !HasPrefix(file, library_prefixes)) continue;
    for (const std::string& prefix : library_prefixes) {
      if (file.compare(0, prefix.size(), prefix) == 0) unmatched.erase(prefix);
    }
    libraries_.push_back(file);
    void* handle = dlopen(module.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) {
      notes_.push_back(file + " cannot be opened by its path: its code is not watched");
      continue;
    }
    for (const std::string& name : names) {
      // dlsym on a handle searches the object's dependencies too; keep only its own definitions.
      const auto address = reinterpret_cast<uintptr_t>(dlsym(handle, name.c_str()));
      if (address == 0 || !module.Contains(address) || !seen.insert(address).second) continue;
      WatchedCode code{name, file, address};
      const bool readable = memory.Read(address, code.bytes.data(), code.bytes.size());
      Keep(std::move(code), readable);
    }
    dlclose(handle);  // only drops the reference dlopen added; the object stays loaded
  }
  for (const std::string& prefix : unmatched) {
    notes_.push_back("no loaded library matches " + prefix + "*: its code is not watched");
  }
}

void SymbolWatch::RecordCodeAt(std::string name, std::string library, const void* address) {
  WatchedCode code{std::move(name), std::move(library), reinterpret_cast<uintptr_t>(address)};
  const bool readable = ReadableMemory().Read(code.address, code.bytes.data(), code.bytes.size());
  Keep(std::move(code), readable);
}

void SymbolWatch::Keep(WatchedCode code, bool readable) {
  if (readable) {
    code_.push_back(std::move(code));
  } else {
    notes_.push_back("the code of " + code.name + " in " + code.library +
                     " is not readable: it is not watched");
  }
}

void SymbolWatch::RecordGot(const void* address_in_module, const std::vector<std::string>& names) {
  slots_.clear();
  const auto anchor = reinterpret_cast<uintptr_t>(address_in_module);
  std::vector<LoadedModule> modules = LoadedModules();
  auto module = std::find_if(modules.begin(), modules.end(),
                             [&](const LoadedModule& m) { return m.Contains(anchor); });
  if (module == modules.end()) {
    notes_.push_back("no loaded module holds " + Hex(anchor) + ": no GOT slot is watched");
    return;
  }
  got_module_ = module->Name();
  const std::set<std::string_view> wanted(names.begin(), names.end());
  const ReadableMemory memory;
  const bool parsed = ForEachImport(*module, [&](std::string_view name, uintptr_t slot) {
    if (wanted.count(name) == 0) return;
    WatchedSlot watched{std::string(name), slot};
    if (!memory.Read(slot, &watched.target, sizeof watched.target)) return;
    watched.lazy = module->Contains(watched.target);
    // dlsym from here resolves in this code's scope: the module's own when it is linked in.
    if (watched.lazy) {
      watched.binding = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, watched.name.c_str()));
    }
    slots_.push_back(std::move(watched));
  });
  if (!parsed)
    notes_.push_back(got_module_ + " has no dynamic symbol table: no GOT slot is watched");
}

std::vector<std::string> SymbolWatch::Check() const {
  std::vector<std::string> findings;
  const ReadableMemory memory;
  if (memory.error().empty()) {
    CheckCode(code_, memory, findings);
    CheckSlots(slots_, got_module_, memory, findings);
  } else if (!code_.empty() || !slots_.empty()) {
    findings.push_back("the timer's code and GOT slots could not be checked: /proc/self/maps: " +
                       memory.error());
  }
  if (const int tracer = TracerPid(); tracer > 0) {
    findings.push_back("a tracer (pid " + std::to_string(tracer) +
                       ") is attached to the worker: it can rewrite the timer's memory at will");
  }
  return findings;
}

nlohmann::json SymbolWatch::Describe() const {
  return {{"symbols", code_.size()},
          {"got_slots", slots_.size()},
          {"got_module", got_module_},
          {"libraries", libraries_},
          {"notes", notes_}};
}

int TracerPid() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    int pid = 0;
    if (std::sscanf(line.c_str(), "TracerPid: %d", &pid) == 1) return pid;
  }
  return -1;
}

const std::vector<std::string>& TimerSymbols() {
  static const auto* names = new std::vector<std::string>{
      // CUPTI: what ActivityCollector calls, and what would stop or fake its records.
      "cuptiActivityEnable", "cuptiActivityDisable", "cuptiActivityEnableContext",
      "cuptiActivityDisableContext", "cuptiActivityFlushAll", "cuptiActivityRegisterCallbacks",
      "cuptiActivityGetNextRecord", "cuptiActivityGetNumDroppedRecords", "cuptiGetTimestamp",
      "cuptiSubscribe", "cuptiUnsubscribe", "cuptiEnableDomain", "cuptiEnableCallback",
      "cuptiFinalize",
      // The driver: launches and synchronisation the records describe.
      "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuCtxSynchronize",
      "cuStreamSynchronize", "cuEventRecord", "cuEventSynchronize", "cuMemsetD8Async",
      "cuMemsetD32Async", "cuGetProcAddress", "cuGetProcAddress_v2", "cuGetExportTable",
      // The runtime, as the timer and its flush and checks call it.
      "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaDeviceSynchronize", "cudaStreamSynchronize",
      "cudaEventRecord", "cudaEventSynchronize", "cudaEventElapsedTime", "cudaMemsetAsync",
      "cudaMemcpyAsync", "cudaCtxResetPersistingL2Cache", "cudaDeviceSetLimit",
      "cudaDeviceGetLimit", "cudaGetLastError"};
  return *names;
}

const std::vector<std::string>& TimerLibraries() {
  static const auto* prefixes =
      new std::vector<std::string>{"libcupti.so", "libcuda.so", "libcudart.so"};
  return *prefixes;
}

}  // namespace kc::native
