// WaitUntil: polls a condition for up to two seconds. Test-only.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "base/clock.h"

namespace kc::pool::testing {

inline bool WaitUntil(const std::function<bool()>& done) {
  using namespace std::chrono_literals;
  const auto deadline = Clock::now() + 2s;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

}  // namespace kc::pool::testing
