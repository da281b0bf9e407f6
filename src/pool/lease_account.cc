#include "pool/lease_account.h"

namespace kc::pool {
namespace {

int64_t Ns(LeaseAccount::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

double Ms(LeaseAccount::Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

bool LeaseAccount::Acquire(const std::function<bool()>& give_up) {
  if (held_) return true;
  const Clock::time_point asked = Clock::now();
  const bool granted =
      give_up ? lease_.AcquireUnless(holder_, give_up) : (lease_.Acquire(holder_), true);
  const Clock::time_point now = Clock::now();
  last_wait_ = now - asked;
  wait_ms_ += Ms(last_wait_);
  if (!granted) return false;
  held_ = true;
  held_since_ = now;
  if (last_wait_ > std::chrono::milliseconds(1)) {  // someone else held it: say who
    for (std::string& holder : lease_.HoldersBetween(Ns(asked), Ns(now))) {
      if (holder != holder_) waited_for_.push_back(std::move(holder));
    }
  }
  return true;
}

void LeaseAccount::Release() {
  if (!held_) return;
  lease_.Release();
  held_ms_ += Ms(Clock::now() - held_since_);
  held_ = false;
}

}  // namespace kc::pool
