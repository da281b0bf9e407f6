// FairShare: weighted fair sharing of one resource's time across tenants (issue 27), the
// order in which waiters for a seat or a GPU lease are served.
//
// Each tenant has a virtual time that grows by the time it held the resource divided by
// its weight (start-time fair queuing). The waiter whose tenant has the least virtual time
// goes first; ties go by arrival. So with weights 3:1 and both tenants saturating, the first
// gets three quarters of the time, and a tenant with 10 requests waits behind at most the
// holds in progress of a tenant with 5,000, never behind its queue. A tenant that comes back
// from idle starts at the virtual time of the last grant, so idling banks no credit, and an
// idle resource is never held back: the order only matters among those waiting. Requests
// without a tenant are one tenant, "" (without keys: first come, first served).
//
// Not thread-safe: the owner's lock guards it.
#pragma once

#include <string>
#include <unordered_map>

namespace kc::pool {

// Whose wait it is, and that tenant's weight.
struct TenantShare {
  std::string tenant;
  double weight = 1;
};

class FairShare {
 public:
  // A waiter of `tenant` arrives; it must later be Granted or Left.
  void Arrive(const std::string& tenant);
  // Its wait ends: served, or gone (given up, expired, revoked).
  void Grant(const std::string& tenant);
  void Leave(const std::string& tenant);
  // `tenant` held the resource for `seconds`; weights below kMinWeight count as it.
  void Charge(const std::string& tenant, double weight, double seconds);

  // The order key of a waiter of `tenant`: lower goes first.
  double VirtualTime(const std::string& tenant) const;

  static constexpr double kMinWeight = 1e-3;

 private:
  struct Tenant {
    double virtual_time = 0;
    int waiting = 0;
  };
  std::unordered_map<std::string, Tenant> tenants_;
  double last_granted_ = 0;  // the virtual time of the last grant
};

}  // namespace kc::pool
