#include "native/symbol_watch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kc::native {
namespace {

// Lies inside this test program, so RecordGot watches the program's own GOT.
int AnchorInTheTestProgram() {
  return 0;
}

pid_t NotGetpid() {
  return 4242;
}

uintptr_t PageOf(uintptr_t address) {
  return address & ~static_cast<uintptr_t>(sysconf(_SC_PAGESIZE) - 1);
}

// Makes the page holding `address` writable as well as `protection` (the tests' patches).
void Unprotect(uintptr_t address, int protection) {
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(PageOf(address)), sysconf(_SC_PAGESIZE),
                     protection | PROT_WRITE),
            0)
      << std::strerror(errno);
}

const WatchedSlot* FindSlot(const SymbolWatch& watch, const std::string& name) {
  for (const WatchedSlot& slot : watch.got_slots()) {
    if (slot.name == name) return &slot;
  }
  return nullptr;
}

bool Mentions(const std::vector<std::string>& findings, const std::string& text) {
  return std::any_of(findings.begin(), findings.end(),
                     [&](const std::string& f) { return f.find(text) != std::string::npos; });
}

TEST(SymbolWatch, RecordsLibcCodeAndFindsNothingInAnUntouchedProcess) {
  SymbolWatch watch;
  watch.RecordCode({"getpid", "getppid", "kc_no_such_symbol"}, {"libc.so", "libkc_not_loaded.so"});
  ASSERT_EQ(watch.code().size(), 2u);
  EXPECT_EQ(watch.code()[0].library.rfind("libc.so", 0), 0u) << watch.code()[0].library;
  EXPECT_TRUE(watch.Check().empty());
  const nlohmann::json described = watch.Describe();
  EXPECT_EQ(described["symbols"], 2);
  ASSERT_EQ(described["notes"].size(), 1u);  // the library that is not loaded, said so
  EXPECT_NE(described["notes"][0].get<std::string>().find("libkc_not_loaded.so"),
            std::string::npos);
}

TEST(SymbolWatch, GotSlotRedirectedIsNamedAndRestoredIsClean) {
  static_cast<void>(getpid());  // bind the lazy slots before recording them
  static_cast<void>(getppid());
  SymbolWatch watch;
  watch.RecordGot(reinterpret_cast<const void*>(&AnchorInTheTestProgram), {"getpid", "getppid"});
  ASSERT_EQ(watch.got_slots().size(), 2u) << watch.Describe().dump();
  EXPECT_EQ(watch.Describe()["got_slots"], 2);
  EXPECT_TRUE(watch.Check().empty());

  const WatchedSlot* slot = FindSlot(watch, "getpid");
  ASSERT_NE(slot, nullptr);
  EXPECT_FALSE(slot->lazy);
  auto* got = reinterpret_cast<uintptr_t*>(slot->slot);
  Unprotect(slot->slot, PROT_READ);  // left writable: the page may hold lazily bound slots
  const uintptr_t genuine = *got;
  *got = reinterpret_cast<uintptr_t>(&NotGetpid);  // what a ctypes patch does
  const std::vector<std::string> findings = watch.Check();
  *got = genuine;  // before anything here calls getpid again
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings, "GOT slot of getpid")) << findings[0];
  EXPECT_TRUE(Mentions(findings, "redirected to")) << findings[0];
  EXPECT_TRUE(watch.Check().empty());
}

TEST(SymbolWatch, LazySlotBoundLaterToTheGenuineFunctionIsClean) {
  SymbolWatch watch;
  watch.RecordGot(reinterpret_cast<const void*>(&AnchorInTheTestProgram), {"getpgrp"});
  const WatchedSlot* slot = FindSlot(watch, "getpgrp");
  ASSERT_NE(slot, nullptr);
  const uintptr_t before = *reinterpret_cast<const uintptr_t*>(slot->slot);
  static_cast<void>(getpgrp());  // the dynamic linker binds the slot now, if it was lazy
  if (slot->lazy) {
    EXPECT_NE(*reinterpret_cast<const uintptr_t*>(slot->slot), before);
  }
  EXPECT_TRUE(watch.Check().empty());
}

TEST(SymbolWatch, InlineRewriteOfLibcCodeIsNamedAndRestoredIsClean) {
  SymbolWatch watch;
  watch.RecordCode({"getppid"}, {"libc.so"});
  ASSERT_EQ(watch.code().size(), 1u);
  const uintptr_t code = watch.code()[0].address;
  // Writable and still executable: other libc functions on the page keep running meanwhile.
  Unprotect(code, PROT_READ | PROT_EXEC);
  auto* first = reinterpret_cast<volatile uint8_t*>(code);
  const uint8_t genuine = *first;
  *first = 0xe9;  // the first byte of a relative jump: a detour
  const std::vector<std::string> findings = watch.Check();
  *first = genuine;
  ASSERT_EQ(
      mprotect(reinterpret_cast<void*>(PageOf(code)), sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC),
      0);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_TRUE(Mentions(findings, "inline rewrite of getppid in libc.so")) << findings[0];
  EXPECT_TRUE(Mentions(findings, "(now e9 ")) << findings[0];
  EXPECT_TRUE(watch.Check().empty());
}

TEST(SymbolWatch, CodeUnmappedOrMadeExecuteOnlyIsAFindingNotACrash) {
  const size_t page = sysconf(_SC_PAGESIZE);
  void* mapped = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  std::memset(mapped, 0x90, page);  // nops, then a return
  static_cast<uint8_t*>(mapped)[kWatchedCodeBytes] = 0xc3;
  ASSERT_EQ(mprotect(mapped, page, PROT_READ | PROT_EXEC), 0);
  SymbolWatch watch;
  watch.RecordCodeAt("jit_function", "a test page", mapped);
  ASSERT_EQ(watch.code().size(), 1u);
  EXPECT_TRUE(watch.Check().empty());

  ASSERT_EQ(mprotect(mapped, page, PROT_EXEC), 0);  // no longer readable: never read it
  EXPECT_TRUE(Mentions(watch.Check(), "jit_function in a test page is no longer readable"));
  ASSERT_EQ(munmap(mapped, page), 0);
  EXPECT_TRUE(Mentions(watch.Check(), "jit_function in a test page is no longer readable"));
}

TEST(SymbolWatch, UnreadableOrUnknownAddressesAreNotesNotCrashes) {
  SymbolWatch watch;
  watch.RecordCodeAt("nowhere", "no library", reinterpret_cast<const void*>(8));
  watch.RecordGot(reinterpret_cast<const void*>(8), {"getpid"});
  EXPECT_TRUE(watch.code().empty());
  EXPECT_TRUE(watch.got_slots().empty());
  EXPECT_EQ(watch.Describe()["notes"].size(), 2u) << watch.Describe().dump();
  EXPECT_TRUE(watch.Check().empty());
}

TEST(SymbolWatch, TimerListsNameTheCuptiCallsAndTheirLibraries) {
  const std::vector<std::string>& names = TimerSymbols();
  for (const char* name : {"cuptiActivityEnable", "cuptiActivityFlushAll", "cuLaunchKernel",
                           "cudaDeviceSynchronize"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_EQ(TimerLibraries().size(), 3u);
}

TEST(TracerPid, ZeroWhenNoTracerIsAttached) {
  EXPECT_EQ(TracerPid(), 0);
}

}  // namespace
}  // namespace kc::native
