#include "pool/lease_account.h"

namespace kc::pool {
bool LeaseAccount::Acquire(const std::function<bool()>& give_up) {
  if (held_) return true;
  const Clock::time_point asked = Clock::now();
  const bool granted = give_up ? lease_.AcquireUnless(holder_, give_up, share_)
                               : (lease_.Acquire(holder_, share_), true);
  const Clock::time_point now = Clock::now();
  last_wait_ = now - asked;
  wait_ms_ += ToMilliseconds(last_wait_);
  if (!granted) return false;
  held_ = true;
  held_since_ = now;
  if (last_wait_ > std::chrono::milliseconds(1)) {  // someone else held it: say who
    for (std::string& holder : lease_.HoldersBetween(ToNs(asked), ToNs(now))) {
      if (holder != holder_) waited_for_.push_back(std::move(holder));
    }
  }
  return true;
}

void LeaseAccount::Release() {
  if (!held_) return;
  lease_.Release();
  held_ms_ += ToMilliseconds(Clock::now() - held_since_);
  held_ = false;
}

}  // namespace kc::pool
