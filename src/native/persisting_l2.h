// PersistingL2Guard: no L2 lines survive the flush (spec/benchmark.md §9.3, llm.c#851).
//
// An access-policy window with hitProp = persisting keeps data in the set-aside part of L2,
// which a flush by ordinary writes does not evict: an input kept resident that way would be
// read from L2 in every "cold" call. For the benchmark's span the guard sets the persisting-L2
// limit to 0 (no set-aside, so windows persist nothing), resets persisting lines before every
// call, and checks after every timed call that the call did not raise the limit again (then it
// is set back to 0 and the benchmark is flagged). The caller's limit is restored at the end.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace kc::native {

class PersistingL2Guard {
 public:
  PersistingL2Guard() = default;
  PersistingL2Guard(const PersistingL2Guard&) = delete;
  PersistingL2Guard& operator=(const PersistingL2Guard&) = delete;
  ~PersistingL2Guard();  // restores the caller's limit

  Status Begin();
  Status BeforeCall();  // cudaCtxResetPersistingL2Cache
  Status AfterTimedCall();

  bool active() const { return active_; }
  size_t caller_limit_bytes() const { return saved_limit_; }
  const std::vector<std::string>& flags() const { return flags_; }

 private:
  bool active_ = false;
  size_t saved_limit_ = 0;
  bool raised_flagged_ = false;
  std::vector<std::string> flags_;
};

}  // namespace kc::native
