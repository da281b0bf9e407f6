// ClusterUsage: TenantQuotas' shared ledger on a cluster node (cluster/usage_ledger.h), so a
// tenant's GPU and CPU seconds per window are summed over every node that ran its requests.
// A charge the cluster cannot take is kept by this node alone, and said in the event log
// (usage_ledger_unavailable); a read it cannot answer leaves this node's own sums to decide.
#pragma once

#include "cluster/cluster_node.h"
#include "pool/event_sink.h"
#include "server/tenancy/tenant_quotas.h"

namespace kc::server {

class ClusterUsage : public TenantQuotas::SharedLedger {
 public:
  ClusterUsage(cluster::ClusterNode& node, pool::EventSink& events)
      : node_(node), events_(events) {}

  void Add(const std::string& tenant, int64_t window, const RunUsage& used) override {
    const Status added = node_.AddUsage(tenant, window, {used.gpu_seconds, used.cpu_seconds});
    if (!added.ok()) {
      events_.Emit(EventLevel::kWarning, "usage_ledger_unavailable",
                   {{"tenant", tenant}, {"error", added.message()}});
    }
  }

  std::optional<RunUsage> Read(const std::string& tenant, int64_t window) override {
    auto sums = node_.Usage(tenant, window);
    if (!sums.ok()) return std::nullopt;
    return RunUsage{sums->gpu_seconds, sums->cpu_seconds};
  }

 private:
  cluster::ClusterNode& node_;
  pool::EventSink& events_;
};

}  // namespace kc::server
