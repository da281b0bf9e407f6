#include "native/argument_rotation.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "native/cuda_status.h"

namespace kc::native {
namespace py = pybind11;
namespace {

constexpr cudaStream_t kStream = 0;  // the timer's stream (cupti_timer.cc)

// Exact comparison: inputs must come back bit for bit (NaN matches NaN).
constexpr OutputTolerance kExact{0.0f, 0.0f};

Status Copy(void* to, const void* from, size_t bytes) {
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

}  // namespace

ArgumentRotation::~ArgumentRotation() = default;

void* ArgumentRotation::DataOf(const Argument& a, int set) const {
  return copied_ ? a.copies[set]->data() : a.original->data();
}

const void* ArgumentRotation::CallerData(size_t tensor) const {
  return tensors_[tensor].original->data();
}

bool ArgumentRotation::Overlaps(const void* data, size_t bytes) const {
  auto overlaps = [&](const void* begin, size_t size) {
    const auto* a = static_cast<const char*>(data);
    const auto* b = static_cast<const char*>(begin);
    return a < b + std::max<size_t>(size, 1) && b < a + std::max<size_t>(bytes, 1);
  };
  for (const Argument& a : tensors_) {
    if (overlaps(a.original->data(), a.original->bytes())) return true;
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
  rotation->functions_ = functions;
  rotation->declared_tolerance_ = plan.tolerance;
  const int n = static_cast<int>(args.size());
  size_t set_bytes = 0;
  std::vector<int> tensor_indices;
  for (int i = 0; i < n; ++i) {
    if (!TorchExchange::IsTensor(args[i])) continue;
    KC_ASSIGN_OR_RETURN(std::unique_ptr<ExportedTensor> exported, TorchExchange::Export(args[i]));
    if (!exported->on_cuda() || !exported->contiguous()) {
      rotation->not_rotated_.push_back(i);
      continue;
    }
    Argument argument;
    argument.index = i;
    set_bytes += exported->bytes();
    argument.original = std::move(exported);
    rotation->tensors_.push_back(std::move(argument));
    tensor_indices.push_back(i);
  }

  if (plan.outputs) {
    for (int index : *plan.outputs) {
      if (std::find(tensor_indices.begin(), tensor_indices.end(), index) == tensor_indices.end()) {
        return InvalidArgumentError("benchmark cfg 'outputs': argument " + std::to_string(index) +
                                    " is not a contiguous CUDA torch.Tensor");
      }
    }
    rotation->declared_outputs_ = plan.outputs;
  }

  // Every set is a copy, so the caller's tensors are never poisoned; after the benchmark the
  // caller's outputs get the reference (as if the calls had run on them).
  int sets = 1;
  const size_t affordable =
      set_bytes == 0 ? 0 : static_cast<size_t>(plan.max_copy_bytes) / set_bytes;
  rotation->copied_ = affordable >= 1;
  if (!rotation->copied_ && set_bytes > 0) {
    rotation->notes_.push_back("arguments not copied: one copy (" + std::to_string(set_bytes) +
                               " bytes) exceeds the copy budget; the calls use the caller's own");
  } else if (plan.rotate && set_bytes > 0) {
    const size_t wanted = std::max<size_t>(2, (plan.target_bytes + set_bytes - 1) / set_bytes);
    sets = static_cast<int>(std::min({wanted, affordable, static_cast<size_t>(plan.max_sets)}));
  }

  for (Argument& a : rotation->tensors_) {
    const ExportedTensor& original = *a.original;
    for (int s = 0; rotation->copied_ && s < sets; ++s) {
      KC_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffer> copy,
                          AllocateDeviceBuffer(original.bytes()));
      KC_RETURN_IF_ERROR(Copy(copy->data(), original.data(), original.bytes()));
      a.copies.push_back(std::move(copy));
    }
  }

  // The Python argument tuples, one per set.
  if (!rotation->copied_) rotation->sets_.push_back(args);
  for (int s = 0; rotation->copied_ && s < sets; ++s) {
    py::tuple tuple(n);
    size_t next = 0;
    for (int i = 0; i < n; ++i) {
      if (next < rotation->tensors_.size() && rotation->tensors_[next].index == i) {
        const Argument& a = rotation->tensors_[next++];
        KC_ASSIGN_OR_RETURN(py::object wrapped, TorchExchange::Wrap(a.copies[s], *a.original));
        tuple[i] = std::move(wrapped);
      } else {
        tuple[i] = args[i];
      }
    }
    rotation->sets_.push_back(std::move(tuple));
  }
  KC_RETURN_IF_ERROR(Synchronize());
  return rotation;
}

// -- Probing --------------------------------------------------------------------------------

Status ArgumentRotation::ResetFirstSet() {
  for (const Argument& a : tensors_) {
    KC_RETURN_IF_ERROR(Copy(DataOf(a, 0), a.original->data(), a.original->bytes()));
  }
  return Synchronize();
}

StatusOr<std::vector<bool>> ArgumentRotation::FirstSetChanged() {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // the call may have used other streams
  KC_ASSIGN_OR_RETURN(DeviceCounters changed,
                      DeviceCounters::Create<unsigned long long>(tensors_.size()));
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(DataOf(a, 0), a.original->data(), a.original->bytes(),
                                              a.original->type(), kExact,
                                              changed.at<unsigned long long>(t), kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, changed.Read<unsigned long long>());
  std::vector<bool> out(tensors_.size());
  for (size_t t = 0; t < tensors_.size(); ++t)
    out[t] = counts[t] != 0;
  return out;
}

Status ArgumentRotation::ZeroInFirstSet(size_t tensor) {
  const Argument& a = tensors_[tensor];
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(DataOf(a, 0), 0, a.original->bytes(), kStream));
  return Synchronize();
}

namespace {

StatusOr<bool> NonZero(const void* data, size_t bytes) {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  KC_ASSIGN_OR_RETURN(DeviceCounters count, DeviceCounters::Create<unsigned long long>(1));
  KC_RETURN_IF_ERROR(
      EnqueueCountBytesOtherThan(data, bytes, 0, count.at<unsigned long long>(0), kStream));
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, count.Read<unsigned long long>());
  return counts[0] != 0;
}

}  // namespace

StatusOr<bool> ArgumentRotation::FirstSetNonZero(size_t tensor) {
  return NonZero(DataOf(tensors_[tensor], 0), tensors_[tensor].original->bytes());
}

StatusOr<bool> ArgumentRotation::CallerNonZero(size_t tensor) {
  return NonZero(tensors_[tensor].original->data(), tensors_[tensor].original->bytes());
}

StatusOr<bool> ArgumentRotation::FirstSetEquals(size_t tensor, const void* expected) {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  const Argument& a = tensors_[tensor];
  KC_ASSIGN_OR_RETURN(DeviceCounters count, DeviceCounters::Create<unsigned long long>(1));
  KC_RETURN_IF_ERROR(EnqueueCountMismatches(DataOf(a, 0), expected, a.original->bytes(),
                                            a.original->type(), kExact,
                                            count.at<unsigned long long>(0), kStream));
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, count.Read<unsigned long long>());
  return counts[0] == 0;
}

StatusOr<std::shared_ptr<DeviceBuffer>> ArgumentRotation::CopyOfFirstSet(size_t tensor) {
  const Argument& a = tensors_[tensor];
  KC_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffer> copy,
                      AllocateDeviceBuffer(a.original->bytes()));
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  KC_RETURN_IF_ERROR(Copy(copy->data(), DataOf(a, 0), a.original->bytes()));
  KC_RETURN_IF_ERROR(Synchronize());
  return copy;
}

void ArgumentRotation::SetMode(size_t tensor, OutputMode mode, std::string found_by,
                               std::vector<bool> writers) {
  tensors_[tensor].mode = mode;
  tensors_[tensor].found_by = std::move(found_by);
  tensors_[tensor].writers = std::move(writers);
}

void ArgumentRotation::ApplyDeclaredOutputs() {
  if (!declared_outputs_) return;
  for (Argument& a : tensors_) {
    if (std::find(declared_outputs_->begin(), declared_outputs_->end(), a.index) !=
        declared_outputs_->end()) {
      a.mode = OutputMode::kPoisoned;
      a.found_by = "cfg outputs";
      a.writers.assign(functions_, true);
    }
  }
}

bool ArgumentRotation::has_outputs() const {
  return std::any_of(tensors_.begin(), tensors_.end(),
                     [](const Argument& a) { return a.output(); });
}

Status ArgumentRotation::TakeReference(int fn,
                                       const std::vector<std::shared_ptr<DeviceBuffer>>& given) {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  for (size_t t = 0; t < tensors_.size(); ++t) {
    Argument& a = tensors_[t];
    if (!a.output()) continue;
    a.reference.resize(functions_);
    a.tolerance.resize(functions_);
    if (t < given.size() && given[t] != nullptr) {
      a.reference[fn] = given[t];
      continue;
    }
    KC_ASSIGN_OR_RETURN(a.reference[fn], CopyOfFirstSet(t));
  }
  return Status::Ok();
}

// -- Around the calls -----------------------------------------------------------------------

Status ArgumentRotation::BeforeCall(int64_t call) {
  const int set = SetOf(call);
  for (const Argument& a : tensors_) {
    if (a.mode == OutputMode::kRestored) {
      KC_RETURN_IF_ERROR(Copy(DataOf(a, set), a.original->data(), a.original->bytes()));
    } else if (a.mode == OutputMode::kPoisoned) {
      KC_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(DataOf(a, set), kPoisonByte, a.original->bytes(), kStream));
    }
  }
  return Status::Ok();
}

Status ArgumentRotation::AfterFirstCall(int fn, int64_t call) {
  return CheckFirstCall(fn, SetOf(call));
}

// The first checked call against the reference: how far apart they lie chooses the tolerance
// (output_tolerance.h), and a difference beyond it is proof (a call that wrote once and then
// skipped, or a cached result).
Status ArgumentRotation::CheckFirstCall(int fn, int set) {
  if (!has_outputs()) return Status::Ok();
  KC_ASSIGN_OR_RETURN(DeviceCounters spreads,
                      DeviceCounters::Create<SpreadCounters>(tensors_.size()));
  KC_ASSIGN_OR_RETURN(DeviceCounters mismatches,
                      DeviceCounters::Create<unsigned long long>(2 * tensors_.size()));
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    if (!a.checked_for(fn)) continue;
    KC_RETURN_IF_ERROR(EnqueueSpread(DataOf(a, set), a.reference[fn]->data(), a.original->bytes(),
                                     a.original->type(), spreads.at<SpreadCounters>(t), kStream));
    // A poisoned output whose reference still holds only poison was never written.
    KC_RETURN_IF_ERROR(EnqueueCountBytesOtherThan(
        a.reference[fn]->data(), a.original->bytes(), kPoisonByte,
        mismatches.at<unsigned long long>(tensors_.size() + t), kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<SpreadCounters> spread, spreads.Read<SpreadCounters>());
  for (size_t t = 0; t < tensors_.size(); ++t) {
    Argument& a = tensors_[t];
    if (!a.checked_for(fn)) continue;
    a.tolerance[fn] = ChooseTolerance(a.original->type(), ToSpread(spread[t]), declared_tolerance_);
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(
        DataOf(a, set), a.reference[fn]->data(), a.original->bytes(), a.original->type(),
        a.tolerance[fn].tolerance, mismatches.at<unsigned long long>(t), kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts,
                      mismatches.Read<unsigned long long>());
  const std::string who = fn == 1 ? "reference " : "";
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    if (!a.checked_for(fn)) continue;
    const std::string name = "output argument " + std::to_string(a.index);
    if (a.mode == OutputMode::kPoisoned && counts[tensors_.size() + t] == 0) {
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
  KC_ASSIGN_OR_RETURN(counters_,
                      DeviceCounters::Create<unsigned long long>(functions_ * timed_calls + 1));
  return Status::Ok();
}

Status ArgumentRotation::AfterTimedCall(int fn, int64_t call, int64_t slot) {
  const int set = SetOf(call);
  for (const Argument& a : tensors_) {
    if (!a.checked_for(fn)) continue;
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(
        DataOf(a, set), a.reference[fn]->data(), a.original->bytes(), a.original->type(),
        a.tolerance[fn].tolerance, counters_.at<unsigned long long>(fn * timed_calls_ + slot),
        kStream));
  }
  return Status::Ok();
}

Status ArgumentRotation::Finish(CheckFindings& findings) {
  for (const std::string& failure : first_call_failures_)
    findings.failures.push_back(failure);
  if (counters_.empty()) return Status::Ok();
  KC_ASSIGN_OR_RETURN(DeviceCounters inputs,
                      DeviceCounters::Create<unsigned long long>(sets_.size() * tensors_.size()));
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    const ExportedTensor& model = *a.original;
    if (a.output()) continue;
    for (int s = 0; copied_ && s < sets(); ++s) {  // each copy against the caller's tensor
      KC_RETURN_IF_ERROR(
          EnqueueCountMismatches(DataOf(a, s), model.data(), model.bytes(), model.type(), kExact,
                                 inputs.at<unsigned long long>(s * tensors_.size() + t), kStream));
    }
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> timed, counters_.Read<unsigned long long>());
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> input, inputs.Read<unsigned long long>());

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
  // The caller's outputs end as the calls would have left them.
  for (size_t t = 0; copied_ && t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    if (!a.checked_for(0)) continue;
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpy(a.original->data(), a.reference[0]->data(),
                                       a.original->bytes(), cudaMemcpyDeviceToDevice));
  }
  return Status::Ok();
}

const DeviceBuffer* ArgumentRotation::FirstReference(int fn, ElementType* type) const {
  for (const Argument& a : tensors_) {
    if (!a.checked_for(fn)) continue;
    *type = a.original->type();
    return a.reference[fn].get();
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
  nlohmann::json found_by = nlohmann::json::object();
  for (const Argument& a : tensors_) {
    rotated.push_back(a.index);
    if (!a.output()) continue;
    outputs.push_back(a.index);
    found_by[std::to_string(a.index)] = a.found_by;
  }
  nlohmann::json out = {{"argument_sets", sets()},
                        {"rotated_arguments", rotated},
                        {"checked_outputs", outputs},
                        {"outputs_found_by", found_by},
                        {"not_rotated_arguments", not_rotated_}};
  if (!notes_.empty()) out["notes"] = notes_;
  return out;
}

}  // namespace kc::native
