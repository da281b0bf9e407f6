// SymbolWatch: evidence that the CUPTI timer's own machinery was rewritten from inside the
// worker (issue 40, item 3). User code shares the timer's process, so with ctypes and mprotect
// it can detour a CUPTI, driver or runtime entry point inline (its first instructions replaced
// by a jump) or redirect the GOT slot through which kcoral._native calls it, and so switch the
// timer's records off or feed it made-up ones; a ptrace tracer can do the same from outside.
//
// Record once, before any upload runs (the worker's bind), then Check at the end of every
// timed span; each finding is one sentence for integrity.flags (docs/benchmark-integrity.md):
//
//   SymbolWatch watch;
//   watch.RecordCode(TimerSymbols(), TimerLibraries());
//   watch.RecordGot(reinterpret_cast<const void*>(&AFunctionOfTheModule), TimerSymbols());
//   ... the timed span ...
//   for (std::string& finding : watch.Check()) flags.push_back(std::move(finding));
//
// Pure: dlsym, dl_iterate_phdr and /proc/self; no CUDA, no Python. Nothing is read at an
// address that /proc/self/maps does not show readable, so a watched page that user code
// unmapped or made execute-only is a finding, not a crash. What could not be watched (a library
// not loaded, a module without a dynamic section) is a note in Describe(), never an error: a
// defence that cannot arm must not stop the benchmark.
//
// Not thread-safe: Record before Check, one caller at a time (the benchmark's thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc::native {

// Enough for a detour: an absolute jump (movabs + jmp) is 12 bytes, a relative one 5.
inline constexpr size_t kWatchedCodeBytes = 16;

// The first code bytes of a watched function, as recorded.
struct WatchedCode {
  std::string name;
  std::string library;  // basename of the object that defines it
  uintptr_t address = 0;
  std::array<uint8_t, kWatchedCodeBytes> bytes{};
};

// A GOT slot of the watched module that refers to a watched name.
struct WatchedSlot {
  std::string name;
  uintptr_t slot = 0;     // the slot's own address
  uintptr_t target = 0;   // its value at Record
  bool lazy = false;      // target is inside the module (its PLT): not bound yet
  uintptr_t binding = 0;  // when lazy, where the dynamic linker will bind it (dlsym)
};

class SymbolWatch {
 public:
  // For each loaded object whose file name starts with one of `library_prefixes`
  // ("libcupti.so" matches libcupti.so.13), the first kWatchedCodeBytes of each of `names` it
  // defines. A name no such object defines is skipped; a prefix nothing matches is a note.
  void RecordCode(const std::vector<std::string>& names,
                  const std::vector<std::string>& library_prefixes);

  // Code at `address`, reported as `name` in `library`: RecordCode's lower level, for tests.
  void RecordCodeAt(std::string name, std::string library, const void* address);

  // The GOT slots (JUMP_SLOT and GLOB_DAT relocations) that refer to `names` in the loaded
  // module holding `address_in_module`. One module per watch; a later call replaces it.
  void RecordGot(const void* address_in_module, const std::vector<std::string>& names);

  // One sentence per finding: watched code whose first bytes changed or that is no longer
  // readable, a GOT slot that points elsewhere than at Record (a lazy slot bound since to the
  // name's genuine definition is fine), and a tracer attached to this process.
  std::vector<std::string> Check() const;

  // {"symbols": n, "got_slots": m, "got_module": str, "libraries": [...], "notes": [...]}
  nlohmann::json Describe() const;

  bool empty() const { return code_.empty() && slots_.empty() && notes_.empty(); }
  const std::vector<WatchedCode>& code() const { return code_; }
  const std::vector<WatchedSlot>& got_slots() const { return slots_; }

 private:
  // Watches `code` when its first bytes could be read, else notes that it is not watched.
  void Keep(WatchedCode code, bool readable);

  std::vector<WatchedCode> code_;
  std::vector<WatchedSlot> slots_;
  std::string got_module_;              // basename of the module whose GOT is watched
  std::vector<std::string> libraries_;  // basenames of the objects RecordCode looked in
  std::vector<std::string> notes_;      // what could not be watched, and why
};

// TracerPid from /proc/self/status: 0 when no tracer is attached, -1 when it cannot be read.
int TracerPid();

// What the CUPTI timer watches: the CUPTI activity calls it makes, and the launch and
// synchronisation entry points of the driver and the runtime whose records it trusts.
const std::vector<std::string>& TimerSymbols();
const std::vector<std::string>& TimerLibraries();  // file-name prefixes for RecordCode

}  // namespace kc::native
