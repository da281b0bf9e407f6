#include "pool/fair_share.h"

#include <algorithm>

namespace kc::pool {

void FairShare::Arrive(const std::string& tenant) {
  Tenant& t = tenants_[tenant];
  if (t.waiting++ == 0) t.virtual_time = std::max(t.virtual_time, last_granted_);
}

void FairShare::Grant(const std::string& tenant) {
  Tenant& t = tenants_[tenant];
  last_granted_ = std::max(last_granted_, t.virtual_time);
  Leave(tenant);
}

void FairShare::Leave(const std::string& tenant) {
  Tenant& t = tenants_[tenant];
  if (t.waiting > 0) --t.waiting;
}

void FairShare::Charge(const std::string& tenant, double weight, double seconds) {
  tenants_[tenant].virtual_time += std::max(seconds, 0.0) / std::max(weight, kMinWeight);
}

double FairShare::VirtualTime(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? last_granted_ : it->second.virtual_time;
}

}  // namespace kc::pool
