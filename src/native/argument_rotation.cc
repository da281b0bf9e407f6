#include "native/argument_rotation.h"

#include <algorithm>
#include <utility>

#include "native/cuda_status.h"

namespace kc::native {
namespace py = pybind11;
namespace {

constexpr cudaStream_t kStream = 0;  // the timer's stream (cupti_timer.cc)

StatusOr<std::shared_ptr<DeviceBuffer>> Allocate(size_t bytes) {
  int device = 0;
  KC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  void* data = nullptr;
  KC_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, bytes == 0 ? 1 : bytes));
  return std::make_shared<DeviceBuffer>(device, data, bytes);
}

// Device counters, zeroed; freed with the rotation.
StatusOr<unsigned long long*> AllocateCounters(size_t count) {
  void* data = nullptr;
  KC_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, count * sizeof(unsigned long long)));
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(data, 0, count * sizeof(unsigned long long), kStream));
  return static_cast<unsigned long long*>(data);
}

StatusOr<std::vector<unsigned long long>> ReadCounters(const unsigned long long* device,
                                                       size_t count) {
  std::vector<unsigned long long> host(count);
  KC_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(host.data(), device, count * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  return host;
}

constexpr const char* kProbed = "changed by a probe call (restored to the caller's values before each call)";

// Exact comparison: inputs must come back bit for bit (NaN matches NaN).
constexpr OutputTolerance kExact{0.0f, 0.0f};
// A paired benchmark's two functions agree as builtins.assert_close's defaults require.
constexpr OutputTolerance kCrossCheck{1e-2f, 1e-3f};

}  // namespace

ArgumentRotation::~ArgumentRotation() {
  if (counters_ != nullptr) static_cast<void>(cudaFree(counters_));
}

void* ArgumentRotation::DataOf(const Argument& a, int set) const {
  return copied_ ? a.copies[set]->data() : a.original->data();
}

StatusOr<std::unique_ptr<ArgumentRotation>> ArgumentRotation::Create(const py::tuple& args,
                                                                     const RotationPlan& plan,
                                                                     int functions) {
  std::unique_ptr<ArgumentRotation> rotation(new ArgumentRotation());
  rotation->functions_ = functions;
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
  // caller's outputs get the first checked call's (as if the calls had run on them).
  int sets = 1;
  const size_t affordable = set_bytes == 0 ? 0 : static_cast<size_t>(plan.max_copy_bytes) / set_bytes;
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
      KC_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffer> copy, Allocate(original.bytes()));
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy->data(), original.data(), original.bytes(),
                                              cudaMemcpyDeviceToDevice, kStream));
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
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(kStream));
  return rotation;
}

Status ArgumentRotation::SettleOutputs(const std::function<Status()>& call_on_first_set) {
  std::vector<bool> output(tensors_.size(), false);
  if (declared_outputs_) {
    outputs_source_ = "cfg outputs";
    for (size_t t = 0; t < tensors_.size(); ++t) {
      output[t] = std::find(declared_outputs_->begin(), declared_outputs_->end(),
                            tensors_[t].index) != declared_outputs_->end();
    }
  } else if (copied_ && !tensors_.empty()) {
    // One call on copies of the caller's values: the arguments it changes are its outputs. It
    // changes nothing when the outputs already held its answer (a program that ran the kernel
    // before timing it); then the guess below holds.
    KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(kStream));
    KC_RETURN_IF_ERROR(call_on_first_set());
    KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    KC_ASSIGN_OR_RETURN(unsigned long long* changed, AllocateCounters(tensors_.size()));
    for (size_t t = 0; t < tensors_.size(); ++t) {
      const Argument& a = tensors_[t];
      KC_RETURN_IF_ERROR(EnqueueCountMismatches(DataOf(a, 0), a.original->data(),
                                                a.original->bytes(), a.original->type(), kExact,
                                                changed + t, kStream));
    }
    StatusOr<std::vector<unsigned long long>> counts = ReadCounters(changed, tensors_.size());
    static_cast<void>(cudaFree(changed));
    KC_RETURN_IF_ERROR(counts.status());
    for (size_t t = 0; t < tensors_.size(); ++t) output[t] = (*counts)[t] != 0;
    outputs_source_ = kProbed;
  }
  if (std::find(output.begin(), output.end(), true) == output.end() && tensors_.size() >= 2 &&
      !declared_outputs_) {
    // Destination-passing style, as the seed's add_one(x, y).
    output.back() = true;
    outputs_source_ = "the last tensor argument (the probe call changed none)";
  }
  for (size_t t = 0; t < tensors_.size(); ++t) {
    Argument& a = tensors_[t];
    a.output = output[t];
    // An output the probe saw change may also be read (in place): it starts every call from
    // the caller's values, which differ from the call's result, so a skipped call still shows.
    a.restore = a.output && outputs_source_ == kProbed;
    for (int f = 0; a.output && f < functions_; ++f) {
      KC_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBuffer> reference, Allocate(a.original->bytes()));
      a.reference.push_back(std::move(reference));
    }
    if (outputs_source_ != kProbed) continue;
    // The probe's output is function 0's reference: a call that computes once and then skips
    // is caught from the first checked call on. Then set 0 goes back to the caller's values.
    if (a.restore) {
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(a.reference[0]->data(), DataOf(a, 0),
                                              a.original->bytes(), cudaMemcpyDeviceToDevice,
                                              kStream));
    }
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(DataOf(a, 0), a.original->data(), a.original->bytes(),
                                            cudaMemcpyDeviceToDevice, kStream));
  }
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(kStream));
  return Status::Ok();
}

Status ArgumentRotation::BeforeCall(int /*fn*/, int64_t call) {
  const int set = SetOf(call);
  for (const Argument& a : tensors_) {
    if (!a.output) continue;
    if (a.restore) {
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(DataOf(a, set), a.original->data(),
                                              a.original->bytes(), cudaMemcpyDeviceToDevice,
                                              kStream));
    } else {
      KC_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(DataOf(a, set), kPoisonByte, a.original->bytes(), kStream));
    }
  }
  return Status::Ok();
}

Status ArgumentRotation::AfterFirstCall(int fn, int64_t call) {
  const int set = SetOf(call);
  for (Argument& a : tensors_) {
    if (!a.output || (a.restore && fn == 0)) continue;  // the probe's output is the reference
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(a.reference[fn]->data(), DataOf(a, set),
                                            a.original->bytes(), cudaMemcpyDeviceToDevice,
                                            kStream));
  }
  return Status::Ok();
}

Status ArgumentRotation::BeginTimed(int64_t timed_calls) {
  timed_calls_ = timed_calls;
  // [fn][slot] for the timed calls, then per (fn, output) the reference's unpoisoned bytes,
  // per (set, input) the input mismatches, and one cross-check counter.
  const size_t count =
      functions_ * timed_calls + functions_ * tensors_.size() + sets_.size() * tensors_.size() + 1;
  KC_ASSIGN_OR_RETURN(counters_, AllocateCounters(count));
  return Status::Ok();
}

Status ArgumentRotation::AfterTimedCall(int fn, int64_t call, int64_t slot) {
  const int set = SetOf(call);
  for (const Argument& a : tensors_) {
    if (!a.output) continue;
    const ExportedTensor& model = *a.original;
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(DataOf(a, set), a.reference[fn]->data(),
                                              model.bytes(), model.type(), OutputTolerance{},
                                              counters_ + fn * timed_calls_ + slot, kStream));
  }
  return Status::Ok();
}

StatusOr<RotationFindings> ArgumentRotation::Finish() {
  RotationFindings findings;
  if (counters_ == nullptr) return findings;
  unsigned long long* unpoisoned = counters_ + functions_ * timed_calls_;
  unsigned long long* input_mismatch = unpoisoned + functions_ * tensors_.size();
  unsigned long long* cross = input_mismatch + sets_.size() * tensors_.size();
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    const ExportedTensor& model = *a.original;
    if (a.output) {
      for (int f = 0; !a.restore && f < functions_; ++f) {
        KC_RETURN_IF_ERROR(EnqueueCountUnpoisoned(a.reference[f]->data(), model.bytes(),
                                                  unpoisoned + f * tensors_.size() + t, kStream));
      }
      if (functions_ == 2) {
        KC_RETURN_IF_ERROR(EnqueueCountMismatches(a.reference[1]->data(), a.reference[0]->data(),
                                                  model.bytes(), model.type(), kCrossCheck, cross,
                                                  kStream));
      }
      continue;
    }
    for (int s = 0; copied_ && s < sets(); ++s) {  // each copy against the caller's tensor
      KC_RETURN_IF_ERROR(EnqueueCountMismatches(DataOf(a, s), a.original->data(), model.bytes(),
                                                model.type(), kExact,
                                                input_mismatch + s * tensors_.size() + t, kStream));
    }
  }
  const size_t total =
      functions_ * timed_calls_ + functions_ * tensors_.size() + sets_.size() * tensors_.size() + 1;
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, ReadCounters(counters_, total));

  const char* names[2] = {"", "reference "};
  for (int f = 0; f < functions_; ++f) {
    const std::string who = functions_ == 2 ? names[f] : "";
    for (int64_t slot = 0; slot < timed_calls_; ++slot) {
      unsigned long long bad = counts[f * timed_calls_ + slot];
      if (bad == 0) continue;
      findings.failures.push_back("timed " + who + "call " + std::to_string(slot) +
                                  " wrote outputs that differ from the "
                                  "reference call's in " +
                                  std::to_string(bad) +
                                  " elements (result caching, a "
                                  "skipped or lazy computation, or a swapped output storage)");
      break;  // the first is enough to say what happened
    }
    for (size_t t = 0; t < tensors_.size(); ++t) {
      if (!tensors_[t].output || tensors_[t].restore) continue;
      if (counts[functions_ * timed_calls_ + f * tensors_.size() + t] == 0) {
        findings.flags.push_back("the first checked " + who +
                                 "call did not write output argument " +
                                 std::to_string(tensors_[t].index) + " at all");
      }
    }
  }
  for (size_t t = 0; t < tensors_.size(); ++t) {
    for (int s = 0; s < sets(); ++s) {
      if (counts[functions_ * timed_calls_ + functions_ * tensors_.size() + s * tensors_.size() +
                 t] != 0) {
        findings.flags.push_back("the benchmarked call changed its input argument " +
                                 std::to_string(tensors_[t].index));
        break;
      }
    }
  }
  if (functions_ == 2) findings.cross_mismatches = counts.back();
  // The caller's outputs end as the calls would have left them, where the first checked call
  // wrote them at all (a wrong guess of `outputs` must not overwrite an input with poison).
  for (size_t t = 0; copied_ && t < tensors_.size(); ++t) {
    const Argument& a = tensors_[t];
    if (!a.output || (!a.restore && counts[functions_ * timed_calls_ + t] == 0)) continue;
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpy(a.original->data(), a.reference[0]->data(),
                                       a.original->bytes(), cudaMemcpyDeviceToDevice));
  }
  return findings;
}

nlohmann::json ArgumentRotation::Describe() const {
  nlohmann::json outputs = nlohmann::json::array();
  nlohmann::json rotated = nlohmann::json::array();
  for (const Argument& a : tensors_) {
    rotated.push_back(a.index);
    if (a.output) outputs.push_back(a.index);
  }
  nlohmann::json out = {{"argument_sets", sets()},
                        {"rotated_arguments", rotated},
                        {"checked_outputs", outputs},
                        {"outputs_chosen_by", outputs_source_},
                        {"not_rotated_arguments", not_rotated_}};
  if (!notes_.empty()) out["notes"] = notes_;
  return out;
}

}  // namespace kc::native
