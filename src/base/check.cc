#include <cstdio>
#include <cstdlib>

#include "base/status.h"

namespace kc::internal {

void CheckFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "KC_CHECK failed: %s at %s:%d\n", condition, file, line);
  std::abort();
}

void ValueOfError(const Status& status) {
  std::fprintf(stderr, "StatusOr: value() of an error: %s\n", status.message().c_str());
  std::abort();
}

}  // namespace kc::internal
