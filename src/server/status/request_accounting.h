// The books a finished request is entered in: /metrics, the dashboard's last hour and, for an
// /execute request, its ring of last requests; and the GPUs' lease and timing-span totals
// sampled beside it, for the history's GPU-time charts; and a run's use, for its tenant.
#pragma once

#include <cstdint>

#include "pool/worker_pool.h"
#include "server/core/http_reply.h"
#include "server/core/services.h"
#include "server/status/metrics.h"
#include "server/status/request_ring.h"
#include "server/status/status_history.h"
#include "server/tenancy/tenant_quotas.h"

namespace kc::server {

// `record`: an /execute request's line in the ring (null for any other request).
void CountFinished(Services& services, const HttpReply& reply, double total_ms,
                   const RequestRecord* record);
void SampleGpuTime(StatusHistory& history, const pool::PoolLoad& load, int64_t unix_ms);

// A finished run counted for /metrics; returns what it used, for its tenant's quotas
// (tenant_quotas.h): GPU use off the lease (off_lease_meter.h) is the tenant's too.
RunUsage RecordRun(Metrics& metrics, const pool::JobResult& ran);

}  // namespace kc::server
