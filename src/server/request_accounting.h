// The books a finished request is entered in: /metrics, the dashboard's last hour and, for an
// /execute request, its ring of last requests; and the GPUs' lease and timing-span totals
// sampled beside it, for the history's GPU-time charts.
#pragma once

#include <cstdint>

#include "pool/worker_pool.h"
#include "server/http_reply.h"
#include "server/request_ring.h"
#include "server/services.h"

namespace kc::server {

// `record`: an /execute request's line in the ring (null for any other request).
void CountFinished(Services& services, const HttpReply& reply, double total_ms,
                   const RequestRecord* record);
void SampleGpuTime(StatusHistory& history, const pool::PoolLoad& load, int64_t unix_ms);

}  // namespace kc::server
