#include "native/activity_collector.h"

#include <atomic>
#include <cstdlib>
#include <iterator>
#include <utility>

#include "native/cuda_status.h"
#include "native/timer_canary.h"

namespace kc::native {
namespace {

// 8 MiB per buffer, as the reference does; records are 8-byte aligned inside (CUPTI requires
// the buffer itself to be 8-byte aligned).
constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlignment = 8;
// Buffers kept for reuse between benchmarks; the rest are freed.
constexpr size_t kMaxFreeBuffers = 4;

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
};
constexpr size_t kKindCount = std::size(kKinds);

// The one collector; CUPTI's buffer callbacks have no user pointer.
std::atomic<ActivityCollector*> g_collector{nullptr};

}  // namespace

StatusOr<ActivityCollector*> ActivityCollector::Get() {
  static std::mutex init_mu;
  std::lock_guard<std::mutex> lock(init_mu);
  if (ActivityCollector* existing = g_collector.load()) return existing;
  // Leaked on purpose: CUPTI may call back until the process exits.
  auto* collector = new ActivityCollector();
  g_collector.store(collector);
  CUptiResult result = cuptiActivityRegisterCallbacks(&OnBufferRequested, &OnBufferCompleted);
  if (result != CUPTI_SUCCESS) {
    g_collector.store(nullptr);
    delete collector;
    return CuptiStatus(result, "cuptiActivityRegisterCallbacks", __FILE__, __LINE__);
  }
  return collector;
}

Status ActivityCollector::Start() {
  // Again at every start, best effort: a program that called cuptiFinalize took the
  // registration with it (its own benchmark is flagged by the canaries; the next one must still
  // be timed). Get() made the first registration, whose failure is the one that counts.
  static_cast<void>(cuptiActivityRegisterCallbacks(&OnBufferRequested, &OnBufferCompleted));
  {
    std::lock_guard<std::mutex> lock(mu_);
    records_ = ActivityRecords();
    dropped_ = 0;
    parse_error_ = Status::Ok();
    collecting_ = true;
  }
  // Reads (and so resets) CUPTI's dropped counter: only this session's drops are reported.
  // Best effort: the counter is read again for every delivered buffer.
  size_t stale_dropped = 0;
  static_cast<void>(cuptiActivityGetNumDroppedRecords(nullptr, 0, &stale_dropped));
  for (size_t i = 0; i < kKindCount; ++i) {
    CUptiResult result = cuptiActivityEnable(kKinds[i]);
    if (result != CUPTI_SUCCESS) {
      Abort();  // disables what was enabled; the enable error is the one to report
      return CuptiStatus(result, "cuptiActivityEnable", __FILE__, __LINE__);
    }
  }
  return Status::Ok();
}

Status ActivityCollector::DisableKinds(size_t count) {
  Status first_error;
  for (size_t i = count; i-- > 0;) {
    CUptiResult result = cuptiActivityDisable(kKinds[i]);
    if (result != CUPTI_SUCCESS && first_error.ok()) {
      first_error = CuptiStatus(result, "cuptiActivityDisable", __FILE__, __LINE__);
    }
  }
  return first_error;
}

// Disabling first means nothing is recorded after the flush. The flush is forced so that a
// buffer CUPTI still considers open is delivered too (spec/benchmark.md §9.1, kineto#95); the
// caller synchronised the device, so every record in it is complete.
Status ActivityCollector::FlushAndDisable() {
  Status disabled = DisableKinds(kKindCount);
  KC_CUPTI_RETURN_IF_ERROR(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  return disabled;
}

StatusOr<ActivityRecords> ActivityCollector::Stop() {
  Status flushed = FlushAndDisable();
  ActivityRecords records;
  size_t dropped = 0;
  Status parse_error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collecting_ = false;
    records = std::exchange(records_, ActivityRecords());
    dropped = dropped_;
    parse_error = parse_error_;
  }
  if (!flushed.ok()) return flushed;
  if (!parse_error.ok()) return parse_error;
  if (dropped > 0) {
    return UnavailableError("CUPTI dropped " + std::to_string(dropped) +
                            " activity records during the timed loop");
  }
  return records;
}

void ActivityCollector::Abort() noexcept {
  // Already on an error path: a second error would only hide the first one.
  static_cast<void>(FlushAndDisable());
  std::lock_guard<std::mutex> lock(mu_);
  collecting_ = false;
  records_ = ActivityRecords();
}

void CUPTIAPI ActivityCollector::OnBufferRequested(uint8_t** buffer, size_t* size,
                                                   size_t* max_records) {
  *size = 0;
  *max_records = 0;  // as many as fit
  *buffer = nullptr;
  ActivityCollector* self = g_collector.load();
  if (self != nullptr) {
    std::lock_guard<std::mutex> lock(self->mu_);
    if (!self->free_buffers_.empty()) {
      *buffer = self->free_buffers_.back();
      self->free_buffers_.pop_back();
    }
  }
  if (*buffer == nullptr) {
    // Declining (nullptr) makes CUPTI drop records, which Stop() then reports.
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  }
  if (*buffer != nullptr) *size = kBufferBytes;
}

void CUPTIAPI ActivityCollector::OnBufferCompleted(CUcontext context, uint32_t stream_id,
                                                   uint8_t* buffer, size_t size,
                                                   size_t valid_size) {
  ActivityCollector* self = g_collector.load();
  if (self == nullptr || buffer == nullptr) {
    std::free(buffer);
    return;
  }
  size_t dropped = 0;
  CUptiResult dropped_result = cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
  std::lock_guard<std::mutex> lock(self->mu_);
  if (dropped_result != CUPTI_SUCCESS && self->parse_error_.ok()) {
    self->parse_error_ =
        CuptiStatus(dropped_result, "cuptiActivityGetNumDroppedRecords", __FILE__, __LINE__);
  }
  if (self->collecting_) {
    self->dropped_ += dropped;
    if (valid_size > 0) self->Parse(buffer, valid_size);
  }
  if (self->free_buffers_.size() < kMaxFreeBuffers && size == kBufferBytes) {
    self->free_buffers_.push_back(buffer);
  } else {
    std::free(buffer);
  }
}

// Called with mu_ held.
void ActivityCollector::Parse(uint8_t* buffer, size_t valid_size) {
  CUpti_Activity* record = nullptr;
  const uint8_t* previous = nullptr;
  for (;;) {
    CUptiResult result = cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) return;  // end of buffer
    if (result != CUPTI_SUCCESS) {
      if (parse_error_.ok()) {
        parse_error_ = CuptiStatus(result, "cuptiActivityGetNextRecord", __FILE__, __LINE__);
      }
      return;
    }
    // Each record lies further into the buffer than the last: a rewritten libcupti that answers
    // success without one would otherwise crash the worker or loop here forever.
    const auto* at = reinterpret_cast<const uint8_t*>(record);
    if (at == nullptr || at < buffer || at >= buffer + valid_size || at <= previous) {
      if (parse_error_.ok()) {
        parse_error_ = UnavailableError(
            "cuptiActivityGetNextRecord answered with no record past the last one (libcupti "
            "rewritten?)");
      }
      return;
    }
    previous = at;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        records_.api.push_back({api->start, api->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        if (IsTimerCanary(kernel->name)) {
          ++records_.canaries;
          break;
        }
        ActivityIdentity identity{.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                  .name_id = InternKernelName(kernel->name)};
        records_.device.push_back(
            {kernel->start, kernel->end, kernel->correlationId, identity, kernel->graphId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        ActivityIdentity identity{
            .kind = CUPTI_ACTIVITY_KIND_MEMCPY, .copy_kind = copy->copyKind, .bytes = copy->bytes};
        records_.device.push_back(
            {copy->start, copy->end, copy->correlationId, identity, copy->graphId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* set = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        ActivityIdentity identity{.kind = CUPTI_ACTIVITY_KIND_MEMSET, .bytes = set->bytes};
        records_.device.push_back(
            {set->start, set->end, set->correlationId, identity, set->graphId});
        break;
      }
      default:
        break;  // kinds enabled by someone else (another CUPTI user in the process)
    }
  }
}

std::string ActivityCollector::KernelName(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, name_id] : name_id_by_text_) {
    if (name_id == id) return name;
  }
  return "";
}

// Called with mu_ held. Ids start at 1; 0 means "no name".
uint32_t ActivityCollector::InternKernelName(const char* name) {
  if (name == nullptr) return 0;
  // The text check guards against CUPTI reusing a freed name's address for another kernel.
  if (auto it = name_id_by_pointer_.find(name);
      it != name_id_by_pointer_.end() && it->second->first == name) {
    return it->second->second;
  }
  auto [it, inserted] =
      name_id_by_text_.try_emplace(name, static_cast<uint32_t>(name_id_by_text_.size() + 1));
  name_id_by_pointer_.insert_or_assign(name, &*it);  // node addresses are stable
  return it->second;
}

}  // namespace kc::native
