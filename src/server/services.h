// Services: what a route or the cluster's executor may use, named by reference (issue 41): the
// parts App owns, once they all exist (App builds one after its workers start). Nothing here
// owns anything, so a test can build one from parts of its own.
#pragma once

#include <string>

#include "cluster/peer_client.h"
#include "pool/worker_pool.h"
#include "server/event_log.h"
#include "server/metrics.h"
#include "server/server_config.h"
#include "server/tenant_quotas.h"
#include "store/blob_store.h"

namespace kc::server {

struct Services {
  const ServerConfig& config;
  EventLog& events;
  Metrics& metrics;
  store::BlobStore& blobs;
  pool::WorkerPool& pool;
  TenantQuotas& quotas;
  // In a cluster: how other nodes reach this one, and the client for their blobs and records.
  const std::string& node_url;
  cluster::PeerClient* peers;
};

// A finished run counted for /metrics; returns what it used, for its tenant's quotas
// (tenant_quotas.h): GPU use off the lease (off_lease_meter.h) is the tenant's too.
RunUsage RecordRun(Metrics& metrics, const pool::JobResult& ran);

}  // namespace kc::server
