// AdmittedRequest: an /execute request that passed parsing, validation and the blob look-up,
// and what it is allowed: everything a seat needs to run it, here or on another node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pool/cancel_flag.h"
#include "pool/worker_pool.h"
#include "protocol/execute_request.h"
#include "store/blob_store.h"

namespace kc::server {

struct AdmittedRequest {
  protocol::ExecuteRequest request;
  store::Resolution resolution;
  double timeout_seconds = 0;
  int64_t output_limit_bytes = 0;
  pool::TenantShare share;  // whose request, and its weight ("" without keys)
  std::string key_id;       // the key it came with (access_keys.h), for revocation
};

// The seat's job for `admitted`; its `done` is the caller's to set.
std::shared_ptr<pool::Job> JobFor(const AdmittedRequest& admitted, const std::string& request_id,
                                  std::shared_ptr<pool::CancelFlag> cancel,
                                  uint64_t max_response_bytes);

// By instruction: whether the worker's engine gives the GPU lease back there (file uploads,
// file and folder returns, cpu_only runs; spec/protocol.md §2.6): RunRequest::releases_at.
std::vector<bool> LeaseReleases(const protocol::Program& program);

// True when some run of the program may touch a GPU (not cpu_only), or it asks for GPUs.
bool NeedsGpu(const protocol::Program& program);

}  // namespace kc::server
