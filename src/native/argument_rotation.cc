#include "native/argument_rotation.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "native/cuda_status.h"
#include "native/input_variant.h"

namespace kc::native {
namespace py = pybind11;
namespace {

constexpr cudaStream_t kStream = 0;  // the timer's stream (cupti_timer.cc)

// Exact comparison: inputs must come back bit for bit (NaN matches NaN).
constexpr OutputTolerance kExact{0.0f, 0.0f};
constexpr ElementType kByte{1, 8};  // uint8: spans compared byte for byte

Status Copy(void* to, const void* from, size_t bytes) {
  if (to == from || bytes == 0) return Status::Ok();
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, kStream));
  return Status::Ok();
}

Status Synchronize() {
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(kStream));
  return Status::Ok();
}

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", value);
  return text;
}

// Bytes that differ between two device buffers; synchronous.
StatusOr<unsigned long long> BytesDiffering(const void* a, const void* b, size_t bytes) {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the call may have used other streams
  KC_ASSIGN_OR_RETURN(DeviceCounters count, DeviceCounters::Create<unsigned long long>(1));
  KC_RETURN_IF_ERROR(
      EnqueueCountMismatches(a, b, bytes, kByte, kExact, count.at<unsigned long long>(0), kStream));
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, count.Read<unsigned long long>());
  return counts[0];
}

StatusOr<bool> NonZero(const void* data, size_t bytes) {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  KC_ASSIGN_OR_RETURN(DeviceCounters count, DeviceCounters::Create<unsigned long long>(1));
  KC_RETURN_IF_ERROR(
      EnqueueCountBytesOtherThan(data, bytes, 0, count.at<unsigned long long>(0), kStream));
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, count.Read<unsigned long long>());
  return counts[0] != 0;
}

int64_t CopyBudget(int64_t floor_bytes) {
  size_t free = 0;
  size_t total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return floor_bytes;
  }
  return std::max<int64_t>(floor_bytes, static_cast<int64_t>(free / 2));
}

}  // namespace

ArgumentRotation::~ArgumentRotation() = default;

void* ArgumentRotation::DataOf(const Argument& a, int set) const {
  return copied_ ? a.copies[set]->data() : a.original->data();
}

const void* ArgumentRotation::ValuesOf(const Argument& a, int variant) const {
  if (a.pristine == nullptr) return a.original->data();  // too large to keep aside
  const bool fresh = a.mode == OutputMode::kInput && a.variant != nullptr && variant == 1;
  return fresh ? a.variant->data() : a.pristine->data();
}

const void* ArgumentRotation::Caller(const Argument& a) const {
  return a.pristine != nullptr ? a.pristine->data() : a.original->data();
}

const void* ArgumentRotation::CallerData(size_t tensor) const {
  return Caller(tensors_[tensor]);
}

bool ArgumentRotation::Overlaps(const void* data, size_t bytes) const {
  auto overlaps = [&](const void* begin, size_t size) {
    const auto* a = static_cast<const char*>(data);
    const auto* b = static_cast<const char*>(begin);
    return a < b + std::max<size_t>(size, 1) && b < a + std::max<size_t>(bytes, 1);
  };
  for (const Argument& a : tensors_) {
    if (overlaps(a.original->data(), a.bytes())) return true;
    for (const auto& copy : a.copies) {
      if (overlaps(copy->data(), copy->bytes())) return true;
    }
  }
  return false;
}

StatusOr<std::unique_ptr<ArgumentRotation>> ArgumentRotation::Create(const py::tuple& args,
                                                                     const RotationPlan& plan,
                                                                     int functions) {
  std::unique_ptr<ArgumentRotation> rotation(new ArgumentRotation());
  ArgumentRotation& r = *rotation;
  r.functions_ = functions;
  r.declared_tolerance_ = plan.tolerance;
  r.caller_args_ = args;
  r.first_calls_.assign(functions, 0);
  r.bytes_changed_.assign(functions, 0);
  const int n = static_cast<int>(args.size());
  size_t set_bytes = 0;
  size_t varied_bytes = 0;
  std::vector<int> tensor_indices;
  for (int i = 0; i < n; ++i) {
    if (!TorchExchange::IsTensor(args[i])) continue;
    KC_ASSIGN_OR_RETURN(std::unique_ptr<ExportedTensor> exported, TorchExchange::Export(args[i]));
    if (!exported->on_cuda() || !exported->forward_strides()) {
      r.not_rotated_.push_back(i);
      continue;
    }
    Argument argument;
    argument.index = i;
    set_bytes += exported->span_bytes();
    if (plan.rotate && HasFreshVariant(exported->type())) varied_bytes += exported->span_bytes();
    argument.original = std::move(exported);
    if (std::find(plan.unverifiable.begin(), plan.unverifiable.end(), i) !=
        plan.unverifiable.end()) {
      argument.mode = OutputMode::kUnverifiable;
      argument.found_by = "cfg unverifiable";
      varied_bytes -= plan.rotate && HasFreshVariant(argument.original->type())
                          ? argument.original->span_bytes()
                          : 0;
    }
    r.tensors_.push_back(std::move(argument));
    tensor_indices.push_back(i);
  }
  auto is_tensor = [&](int index) {
    return std::find(tensor_indices.begin(), tensor_indices.end(), index) != tensor_indices.end();
  };
  for (int index : plan.unverifiable) {
    if (!is_tensor(index)) {
      return InvalidArgumentError("benchmark cfg 'unverifiable': 'arg:" + std::to_string(index) +
                                  "' is not a CUDA torch.Tensor argument");
    }
  }
  if (plan.outputs) {
    for (int index : *plan.outputs) {
      if (!is_tensor(index)) {
        return InvalidArgumentError("benchmark cfg 'outputs': argument " + std::to_string(index) +
                                    " is not a CUDA torch.Tensor");
      }
    }
    r.declared_outputs_ = plan.outputs;
  }

  // Kept aside: the caller's values and the fresh ones. Then as many copies as the budget and
  // the L2 call for; without room for two, the calls run in place on the caller's tensors.
  const int64_t budget = CopyBudget(plan.max_copy_bytes);
  const size_t kept = set_bytes + varied_bytes;
  int sets = 1;
  if (r.tensors_.empty()) {
    r.copied_ = false;
  } else if (static_cast<int64_t>(kept) > budget) {
    r.copied_ = false;
    r.notes_.push_back("arguments not copied: keeping the caller's values aside (" +
                       std::to_string(kept) + " bytes) exceeds the copy budget (" +
                       std::to_string(budget) + " bytes); the calls use the caller's own");
  } else {
    const size_t affordable =
        set_bytes == 0 ? 8 : static_cast<size_t>(budget - static_cast<int64_t>(kept)) / set_bytes;
    const size_t wanted = plan.rotate ? std::max<size_t>(2, (plan.target_bytes + set_bytes - 1) /
                                                                std::max<size_t>(set_bytes, 1))
                                      : 1;
    if (affordable < std::min<size_t>(wanted, 2)) {
      r.copied_ = false;
      r.in_place_ = true;
      r.notes_.push_back("arguments checked in place: two copies (" +
                         std::to_string(2 * set_bytes) +
                         " bytes) exceed the copy budget; the calls use the caller's tensors, "
                         "given each set's values before the call and their own at the end");
    } else {
      sets = static_cast<int>(std::min({wanted, affordable, static_cast<size_t>(plan.max_sets)}));
    }
  }
  const bool keep_aside = r.copied_ || r.in_place_;
  for (Argument& a : r.tensors_) {
    if (!keep_aside) break;
    KC_ASSIGN_OR_RETURN(a.pristine, AllocateDeviceBuffer(a.bytes()));
    KC_RETURN_IF_ERROR(Copy(a.pristine->data(), a.original->data(), a.bytes()));
  }
  // Fresh values where they differ from the caller's (all zeros stay zeros).
  if (keep_aside && varied_bytes > 0 && (r.in_place_ || sets >= 2)) {
    for (Argument& a : r.tensors_) {
      if (a.mode != OutputMode::kInput || !HasFreshVariant(a.original->type())) continue;
      KC_ASSIGN_OR_RETURN(a.variant, AllocateDeviceBuffer(a.bytes()));
      KC_RETURN_IF_ERROR(EnqueueFreshVariant(a.pristine->data(), a.variant->data(), a.bytes(),
                                             a.original->type(), kStream));
      KC_ASSIGN_OR_RETURN(unsigned long long differing,
                          BytesDiffering(a.pristine->data(), a.variant->data(), a.bytes()));
      if (differing == 0) a.variant.reset();
      if (a.variant != nullptr) r.variants_ = 2;
    }
  }
  if (r.in_place_) sets = r.variants_;
  for (int s = 0; s < sets; ++s)
    r.loaded_.push_back(s % r.variants_);

  for (Argument& a : r.tensors_) {
    for (int s = 0; r.copied_ && s < sets; ++s) {
      KC_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffer> copy, AllocateDeviceBuffer(a.bytes()));
      a.copies.push_back(std::move(copy));
    }
  }
  // The Python argument tuples, one per set.
  if (!r.copied_) {
    r.sets_.assign(sets, args);
  }
  for (int s = 0; r.copied_ && s < sets; ++s) {
    py::tuple tuple(n);
    size_t next = 0;
    for (int i = 0; i < n; ++i) {
      if (next < r.tensors_.size() && r.tensors_[next].index == i) {
        Argument& a = r.tensors_[next++];
        KC_RETURN_IF_ERROR(Copy(a.copies[s]->data(), r.ValuesOf(a, s % r.variants_), a.bytes()));
        KC_ASSIGN_OR_RETURN(py::object wrapped, TorchExchange::Wrap(a.copies[s], *a.original));
        tuple[i] = std::move(wrapped);
      } else {
        tuple[i] = args[i];
      }
    }
    r.sets_.push_back(std::move(tuple));
  }
  KC_RETURN_IF_ERROR(Synchronize());
  return rotation;
}

void ArgumentRotation::UseInPlace() {
  for (Argument& a : tensors_)
    a.copies.clear();
  copied_ = false;
  in_place_ = true;
  sets_.assign(variants_, caller_args_);
  loaded_.resize(sets_.size());
}

// -- Probing --------------------------------------------------------------------------------

Status ArgumentRotation::ResetFirstSet() {
  if (!can_probe()) return Status::Ok();
  for (const Argument& a : tensors_) {
    KC_RETURN_IF_ERROR(Copy(DataOf(a, 0), ValuesOf(a, 0), a.bytes()));
  }
  Loaded(0) = 0;
  return Synchronize();
}

Status ArgumentRotation::PrepareSet(int set) {
  for (const Argument& a : tensors_) {
    if (a.pristine != nullptr) {
      KC_RETURN_IF_ERROR(Copy(DataOf(a, set), ValuesOf(a, set % variants_), a.bytes()));
    }
  }
  Loaded(set) = set % variants_;
  KC_RETURN_IF_ERROR(BeforeCall(set));
  return Synchronize();
}

Status ArgumentRotation::PrepareVariedSet(std::optional<float> scale) {
  if (!can_vary_anew()) return FailedPreconditionError("no set can be given fresh values");
  KC_RETURN_IF_ERROR(PrepareSet(1));
  if (!scale) return Status::Ok();
  for (const Argument& a : tensors_) {
    if (a.mode != OutputMode::kInput || a.variant == nullptr) continue;
    KC_RETURN_IF_ERROR(EnqueueReversedScaled(a.pristine->data(), DataOf(a, 1), a.bytes(),
                                             a.original->type(), *scale, kStream));
  }
  return Synchronize();
}

StatusOr<bool> ArgumentRotation::VariedSetIsNew() const {
  bool any = false;
  for (const Argument& a : tensors_) {
    if (a.mode != OutputMode::kInput || a.variant == nullptr) continue;
    KC_ASSIGN_OR_RETURN(unsigned long long differing,
                        BytesDiffering(DataOf(a, 1), a.pristine->data(), a.bytes()));
    if (differing == 0) return false;
    any = true;
  }
  return any;
}

StatusOr<std::optional<bool>> ArgumentRotation::VariedSetAnsweredAsCaller(int fn) const {
  bool any_checked = false;
  for (const Argument& a : tensors_) {
    if (!a.checked_for(fn) || a.reference[fn][0] == nullptr) continue;
    any_checked = true;
    KC_ASSIGN_OR_RETURN(unsigned long long differing,
                        BytesDiffering(DataOf(a, 1), a.reference[fn][0]->data(), a.bytes()));
    if (differing != 0) return std::optional<bool>(false);
  }
  return any_checked ? std::optional<bool>(true) : std::optional<bool>();
}

StatusOr<bool> ArgumentRotation::MoveInPlaceIfCallerWritten() {
  if (!copied_) return false;
  std::string written;
  for (const Argument& a : tensors_) {
    KC_ASSIGN_OR_RETURN(unsigned long long differing,
                        BytesDiffering(a.original->data(), a.pristine->data(), a.bytes()));
    if (differing != 0) written += (written.empty() ? "" : ", ") + std::to_string(a.index);
  }
  if (written.empty()) return false;
  KC_RETURN_IF_ERROR(MoveInPlace("the call wrote the caller's own argument " + written +
                                 ", not the copy it was given"));
  return true;
}

Status ArgumentRotation::MoveInPlace(const std::string& why) {
  if (!copied_) return Status::Ok();
  for (const Argument& a : tensors_) {
    KC_RETURN_IF_ERROR(Copy(a.original->data(), a.pristine->data(), a.bytes()));
  }
  KC_RETURN_IF_ERROR(Synchronize());
  UseInPlace();
  notes_.push_back("arguments checked in place: " + why +
                   " (a CUDA graph captured on the caller's tensors, or a closure), so each "
                   "set's values are written into the caller's tensors before the call, and they "
                   "get their own values back at the end");
  return Status::Ok();
}

StatusOr<std::vector<bool>> ArgumentRotation::FirstSetChanged() {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the call may have used other streams
  KC_ASSIGN_OR_RETURN(DeviceCounters changed,
                      DeviceCounters::Create<unsigned long long>(tensors_.size()));
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(DataOf(a, 0), ValuesOf(a, 0), a.bytes(), kByte,
                                              kExact, changed.at<unsigned long long>(t), kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, changed.Read<unsigned long long>());
  std::vector<bool> out(tensors_.size());
  for (size_t t = 0; t < tensors_.size(); ++t)
    out[t] = counts[t] != 0 && tensors_[t].mode != OutputMode::kUnverifiable;
  return out;
}

Status ArgumentRotation::ZeroInFirstSet(size_t tensor) {
  const Argument& a = tensors_[tensor];
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(DataOf(a, 0), 0, a.bytes(), kStream));
  return Synchronize();
}

StatusOr<bool> ArgumentRotation::FirstSetNonZero(size_t tensor) {
  if (tensors_[tensor].mode == OutputMode::kUnverifiable) return false;
  return NonZero(DataOf(tensors_[tensor], 0), tensors_[tensor].bytes());
}

StatusOr<bool> ArgumentRotation::CallerNonZero(size_t tensor) {
  return NonZero(CallerData(tensor), tensors_[tensor].bytes());
}

StatusOr<bool> ArgumentRotation::FirstSetEquals(size_t tensor, const void* expected) {
  const Argument& a = tensors_[tensor];
  KC_ASSIGN_OR_RETURN(unsigned long long differing,
                      BytesDiffering(DataOf(a, 0), expected, a.bytes()));
  return differing == 0;
}

StatusOr<std::shared_ptr<DeviceBuffer>> ArgumentRotation::CopyOfSet(size_t tensor, int set) {
  const Argument& a = tensors_[tensor];
  KC_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffer> copy, AllocateDeviceBuffer(a.bytes()));
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  KC_RETURN_IF_ERROR(Copy(copy->data(), DataOf(a, set), a.bytes()));
  KC_RETURN_IF_ERROR(Synchronize());
  return copy;
}

void ArgumentRotation::SetMode(size_t tensor, OutputMode mode, std::string found_by,
                               std::vector<bool> writers) {
  Argument& a = tensors_[tensor];
  if (a.mode == OutputMode::kUnverifiable) return;  // declared: never checked
  a.mode = mode;
  a.found_by = std::move(found_by);
  a.writers = std::move(writers);
  a.variant.reset();  // an output starts each call from the caller's values
}

void ArgumentRotation::ApplyDeclaredOutputs() {
  if (!declared_outputs_) return;
  for (Argument& a : tensors_) {
    if (a.mode == OutputMode::kUnverifiable) continue;
    if (std::find(declared_outputs_->begin(), declared_outputs_->end(), a.index) !=
        declared_outputs_->end()) {
      a.mode = OutputMode::kPoisoned;
      a.found_by = "cfg outputs";
      a.writers.assign(functions_, true);
      a.variant.reset();
    }
  }
}

bool ArgumentRotation::has_outputs() const {
  return std::any_of(tensors_.begin(), tensors_.end(),
                     [](const Argument& a) { return a.output(); });
}

bool ArgumentRotation::any_varied() const {
  return variants_ == 2 && std::any_of(tensors_.begin(), tensors_.end(), [](const Argument& a) {
           return a.mode == OutputMode::kInput && a.variant != nullptr;
         });
}

Status ArgumentRotation::DropVariants(const std::string& why) {
  for (Argument& a : tensors_) {
    for (int s = 1; copied_ && s < sets(); s += 2) {
      KC_RETURN_IF_ERROR(Copy(a.copies[s]->data(), Caller(a), a.bytes()));
    }
    a.variant.reset();
  }
  variants_ = 1;
  loaded_.assign(loaded_.size(), 0);
  if (in_place_) {
    sets_.resize(1);
    loaded_.resize(1);
  }
  notes_.push_back("fresh input values dropped: " + why + "; every call gets the caller's");
  return Synchronize();
}

uint64_t ArgumentRotation::output_bytes(int fn) const {
  uint64_t bytes = 0;
  for (const Argument& a : tensors_) {
    if (a.checked_for(fn)) bytes += a.original->bytes();
  }
  return bytes;
}

std::vector<std::string> ArgumentRotation::DeclaredUnverifiable() const {
  std::vector<std::string> out;
  for (const Argument& a : tensors_) {
    if (a.mode != OutputMode::kUnverifiable) continue;
    out.push_back("declared unverifiable: argument " + std::to_string(a.index) +
                  " (cfg unverifiable 'arg:" + std::to_string(a.index) +
                  "'): restored before each call and never checked");
  }
  return out;
}

Status ArgumentRotation::TakeReference(int fn, int variant,
                                       const std::vector<std::shared_ptr<DeviceBuffer>>& given) {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  for (size_t t = 0; t < tensors_.size(); ++t) {
    Argument& a = tensors_[t];
    if (!a.output()) continue;
    a.reference.resize(functions_);
    a.tolerance.resize(functions_);
    a.spread.resize(functions_);
    if (t < given.size() && given[t] != nullptr) {
      a.reference[fn][variant] = given[t];
      continue;
    }
    KC_ASSIGN_OR_RETURN(a.reference[fn][variant], CopyOfSet(t, variant));
  }
  return Status::Ok();
}

StatusOr<std::optional<bool>> ArgumentRotation::OutputsFollowInputs(int fn) const {
  if (!any_varied()) return std::optional<bool>();
  bool any_checked = false;
  for (const Argument& a : tensors_) {
    if (!a.checked_for(fn) || a.reference[fn][1] == nullptr) continue;
    any_checked = true;
    KC_ASSIGN_OR_RETURN(
        unsigned long long differing,
        BytesDiffering(a.reference[fn][0]->data(), a.reference[fn][1]->data(), a.bytes()));
    if (differing != 0) return std::optional<bool>(true);
  }
  return any_checked ? std::optional<bool>(false) : std::optional<bool>();
}

// -- Around the calls -----------------------------------------------------------------------

Status ArgumentRotation::LoadValues(int set, int variant) {
  for (const Argument& a : tensors_) {
    if (a.mode != OutputMode::kInput || (!in_place_ && a.variant == nullptr)) continue;
    if (!inputs_changed_.empty()) {  // timed calls must leave their inputs as they found them
      KC_RETURN_IF_ERROR(
          EnqueueCountMismatches(DataOf(a, set), ValuesOf(a, Loaded(set)), a.bytes(), kByte, kExact,
                                 inputs_changed_.at<unsigned long long>(0), kStream));
    }
    KC_RETURN_IF_ERROR(Copy(DataOf(a, set), ValuesOf(a, variant), a.bytes()));
  }
  Loaded(set) = variant;
  return Status::Ok();
}

Status ArgumentRotation::BeforeCall(int64_t call) {
  const int set = SetOf(call);
  const int variant = VariantOf(call);
  if (can_probe() && (in_place_ || Loaded(set) != variant)) {
    KC_RETURN_IF_ERROR(LoadValues(set, variant));
  }
  for (const Argument& a : tensors_) {
    if (a.mode == OutputMode::kRestored || a.mode == OutputMode::kUnverifiable) {
      KC_RETURN_IF_ERROR(Copy(DataOf(a, set), Caller(a), a.bytes()));
    } else if (a.mode == OutputMode::kPoisoned) {
      KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(DataOf(a, set), kPoisonByte, a.bytes(), kStream));
    }
  }
  return Status::Ok();
}

Status ArgumentRotation::AfterFirstCall(int fn, int64_t call) {
  return CheckFirstCall(fn, SetOf(call), VariantOf(call));
}

bool ArgumentRotation::WantsSpreadCall(int fn) const {
  if (declared_tolerance_ || first_calls_[fn] >= kSpreadCalls) return false;
  return std::any_of(tensors_.begin(), tensors_.end(), [&](const Argument& a) {
    return a.checked_for(fn) && a.original->type().bits == 16 &&
           IsFloatingType(a.original->type()) && a.spread[fn].max_abs_diff > 0 &&
           !a.tolerance[fn].beyond_rounding;
  });
}

// A first checked call against the reference: how far apart they lie (with the earlier first
// calls) chooses the tolerance (output_tolerance.h), and a difference beyond it is proof (a
// call that wrote once and then skipped, or a cached result).
Status ArgumentRotation::CheckFirstCall(int fn, int set, int variant) {
  if (!has_outputs()) return Status::Ok();
  const bool first = first_calls_[fn]++ == 0;
  const size_t n = tensors_.size();
  KC_ASSIGN_OR_RETURN(DeviceCounters spreads, DeviceCounters::Create<SpreadCounters>(n));
  KC_ASSIGN_OR_RETURN(DeviceCounters counts_device,
                      DeviceCounters::Create<unsigned long long>(3 * n));
  for (size_t t = 0; t < n; ++t) {
    const Argument& a = tensors_[t];
    if (!a.checked_for(fn)) continue;
    const void* reference = a.reference[fn][variant]->data();
    KC_RETURN_IF_ERROR(EnqueueSpread(DataOf(a, set), reference, a.bytes(), a.original->type(),
                                     spreads.at<SpreadCounters>(t), kStream));
    // A poisoned output whose reference still holds only poison was never written; the bytes
    // the reference call changed bound the call's time from below (the floor).
    if (a.mode == OutputMode::kPoisoned) {
      KC_RETURN_IF_ERROR(EnqueueCountBytesOtherThan(
          reference, a.bytes(), kPoisonByte, counts_device.at<unsigned long long>(n + t), kStream));
    } else {
      KC_RETURN_IF_ERROR(EnqueueCountMismatches(reference, Caller(a), a.bytes(), kByte, kExact,
                                                counts_device.at<unsigned long long>(n + t),
                                                kStream));
    }
  }
  KC_ASSIGN_OR_RETURN(std::vector<SpreadCounters> spread, spreads.Read<SpreadCounters>());
  for (size_t t = 0; t < n; ++t) {
    Argument& a = tensors_[t];
    if (!a.checked_for(fn)) continue;
    a.spread[fn] = first ? ToSpread(spread[t]) : WiderSpread(a.spread[fn], ToSpread(spread[t]));
    a.tolerance[fn] = ChooseTolerance(a.original->type(), a.spread[fn], declared_tolerance_);
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(
        DataOf(a, set), a.reference[fn][variant]->data(), a.bytes(), a.original->type(),
        a.tolerance[fn].tolerance, counts_device.at<unsigned long long>(t), kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts,
                      counts_device.Read<unsigned long long>());
  const std::string who = fn == 1 ? "reference " : "";
  for (size_t t = 0; t < n; ++t) {
    const Argument& a = tensors_[t];
    if (!a.checked_for(fn)) continue;
    const std::string name = "output argument " + std::to_string(a.index);
    if (first) bytes_changed_[fn] += counts[n + t];
    if (first && a.mode == OutputMode::kPoisoned && counts[n + t] == 0 && a.bytes() > 0) {
      first_call_flags_.push_back("the reference " + who + "call did not write " + name +
                                  " at all (" + a.found_by + "), so its checks compare poison " +
                                  "with poison");
    } else if (counts[t] != 0) {
      first_call_failures_.push_back("the first checked " + who + "call's " + name +
                                     " differs from the reference call's in " +
                                     std::to_string(counts[t]) + " elements (largest difference " +
                                     Number(a.tolerance[fn].spread) + ") " + kMismatchCauses);
    }
  }
  return Status::Ok();
}

Status ArgumentRotation::BeginTimed(int64_t timed_calls) {
  timed_calls_ = timed_calls;
  KC_ASSIGN_OR_RETURN(inputs_changed_, DeviceCounters::Create<unsigned long long>(1));
  KC_ASSIGN_OR_RETURN(counters_,
                      DeviceCounters::Create<unsigned long long>(functions_ * timed_calls + 1));
  return Status::Ok();
}

Status ArgumentRotation::AfterTimedCall(int fn, int64_t call, int64_t slot) {
  const int set = SetOf(call);
  for (const Argument& a : tensors_) {
    if (!a.checked_for(fn)) continue;
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(
        DataOf(a, set), a.reference[fn][VariantOf(call)]->data(), a.bytes(), a.original->type(),
        a.tolerance[fn].tolerance, counters_.at<unsigned long long>(fn * timed_calls_ + slot),
        kStream));
  }
  return Status::Ok();
}

Status ArgumentRotation::Finish(CheckFindings& findings) {
  for (const std::string& failure : first_call_failures_)
    findings.failures.push_back(failure);
  for (const std::string& flag : first_call_flags_)
    findings.flags.push_back(flag);
  if (counters_.empty()) return Status::Ok();
  // Each input as its set holds it. In place every set is the caller's one tensor, holding the
  // values the last call was given (Loaded), so it is checked once.
  KC_ASSIGN_OR_RETURN(DeviceCounters inputs,
                      DeviceCounters::Create<unsigned long long>(sets_.size() * tensors_.size()));
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    if (a.mode != OutputMode::kInput || a.pristine == nullptr) continue;
    for (int s = 0; s < sets(); ++s) {
      if (in_place_ && s != 0) continue;
      KC_RETURN_IF_ERROR(
          EnqueueCountMismatches(DataOf(a, s), ValuesOf(a, Loaded(s)), a.bytes(), kByte, kExact,
                                 inputs.at<unsigned long long>(s * tensors_.size() + t), kStream));
    }
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> timed, counters_.Read<unsigned long long>());
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> input, inputs.Read<unsigned long long>());
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> reloaded,
                      inputs_changed_.Read<unsigned long long>());
  if (reloaded[0] != 0) {
    findings.flags.push_back("the benchmarked call changed its input arguments in timed calls (" +
                             std::to_string(reloaded[0]) +
                             " bytes found changed before they were given new values)");
  }

  for (int f = 0; f < functions_; ++f) {
    const std::string who = f == 1 ? "reference " : "";
    for (int64_t slot = 0; slot < timed_calls_; ++slot) {
      const unsigned long long bad = timed[f * timed_calls_ + slot];
      if (bad == 0) continue;
      findings.failures.push_back(
          "timed " + who + "call " + std::to_string(slot) + " wrote output arguments that differ " +
          "from the reference call's in " + std::to_string(bad) + " elements " + kMismatchCauses);
      break;  // the first is enough to say what happened
    }
  }
  for (size_t t = 0; t < tensors_.size(); ++t) {
    for (int s = 0; s < sets(); ++s) {
      if (input[s * tensors_.size() + t] != 0) {
        findings.flags.push_back("the benchmarked call changed its input argument " +
                                 std::to_string(tensors_[t].index) +
                                 " in a timed call, though the reference calls left it as it was");
        break;
      }
    }
  }
  // The caller's tensors end as the calls would have left them: outputs hold the reference,
  // and (in place) everything else its own values.
  for (const Argument& a : tensors_) {
    if (a.checked_for(0) && (copied_ || in_place_)) {
      KC_RETURN_IF_ERROR(Copy(a.original->data(), a.reference[0][0]->data(), a.bytes()));
    } else if (in_place_) {
      KC_RETURN_IF_ERROR(Copy(a.original->data(), Caller(a), a.bytes()));
    }
  }
  return Synchronize();
}

const DeviceBuffer* ArgumentRotation::FirstReference(int fn, ElementType* type) const {
  for (const Argument& a : tensors_) {
    if (!a.checked_for(fn)) continue;
    *type = a.original->type();
    return a.reference[fn][0].get();
  }
  return nullptr;
}

std::optional<ToleranceChoice> ArgumentRotation::FirstTolerance() const {
  for (const Argument& a : tensors_) {
    if (a.checked_for(0) && !a.tolerance.empty()) return a.tolerance[0];
  }
  return std::nullopt;
}

nlohmann::json ArgumentRotation::Describe() const {
  nlohmann::json outputs = nlohmann::json::array();
  nlohmann::json rotated = nlohmann::json::array();
  nlohmann::json varied = nlohmann::json::array();
  nlohmann::json unverifiable = nlohmann::json::array();
  nlohmann::json found_by = nlohmann::json::object();
  for (const Argument& a : tensors_) {
    rotated.push_back(a.index);
    if (a.variant != nullptr && variants_ == 2) varied.push_back(a.index);
    if (a.mode == OutputMode::kUnverifiable) unverifiable.push_back(a.index);
    if (!a.output()) continue;
    outputs.push_back(a.index);
    found_by[std::to_string(a.index)] = a.found_by;
  }
  nlohmann::json out = {{"argument_sets", sets()},
                        {"value_variants", variants_},
                        {"varied_arguments", varied},
                        {"in_place", in_place_},
                        {"rotated_arguments", rotated},
                        {"checked_outputs", outputs},
                        {"unverifiable_arguments", unverifiable},
                        {"outputs_found_by", found_by},
                        {"not_rotated_arguments", not_rotated_}};
  if (!notes_.empty()) out["notes"] = notes_;
  return out;
}

}  // namespace kc::native
