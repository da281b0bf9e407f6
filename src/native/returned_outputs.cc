#include "native/returned_outputs.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "native/cuda_status.h"
#include "native/element_source.h"
#include "native/output_check.h"

namespace kc::native {
namespace py = pybind11;
namespace {

constexpr cudaStream_t kStream = 0;  // the timer's stream (cupti_timer.cc)
constexpr int kMaxDepth = 4;
constexpr size_t kMaxTensors = 64;

struct Found {
  std::string path;
  py::object object;
};

// The tensors of a return value, by path, and what could not be looked at.
struct Flattened {
  std::vector<Found> found;
  std::vector<std::string> skipped;
  bool truncated = false;
};

// Reads containers without running their Python code (no __iter__, no __getitem__).
void Flatten(py::handle value, const std::string& path, int depth, Flattened& out) {
  if (TorchExchange::IsTensor(value)) {
    if (out.found.size() < kMaxTensors) {
      out.found.push_back({path, py::reinterpret_borrow<py::object>(value)});
    } else if (!out.truncated) {
      out.truncated = true;
      out.skipped.push_back(path + " and later tensors (over " + std::to_string(kMaxTensors) + ")");
    }
  } else if (TorchExchange::IsTensorInstance(value)) {
    out.skipped.push_back(path + " (a torch.Tensor subclass)");
  } else if (depth < kMaxDepth && (PyTuple_Check(value.ptr()) || PyList_Check(value.ptr()))) {
    const bool tuple = PyTuple_Check(value.ptr());
    const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(value.ptr()) : PyList_GET_SIZE(value.ptr());
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = tuple ? PyTuple_GET_ITEM(value.ptr(), i) : PyList_GET_ITEM(value.ptr(), i);
      Flatten(item, path + "[" + std::to_string(i) + "]", depth + 1, out);
    }
  } else if (depth < kMaxDepth && PyDict_CheckExact(value.ptr())) {
    PyObject* key = nullptr;
    PyObject* item = nullptr;
    Py_ssize_t position = 0;
    int index = 0;
    while (PyDict_Next(value.ptr(), &position, &key, &item)) {
      const char* text = PyUnicode_CheckExact(key) ? PyUnicode_AsUTF8(key) : nullptr;
      if (text == nullptr) PyErr_Clear();
      const std::string name = text != nullptr ? "'" + std::string(text).substr(0, 64) + "'"
                                               : "#" + std::to_string(index);
      Flatten(item, path + "[" + name + "]", depth + 1, out);
      ++index;
    }
  }
}

std::vector<int64_t> ShapeOf(const ExportedTensor& tensor) {
  const DLTensor& t = tensor.dl();
  return std::vector<int64_t>(t.shape, t.shape + t.ndim);
}

Status Synchronize() {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return Status::Ok();
}

}  // namespace

ReturnedOutputs::ReturnedOutputs(int functions, const ArgumentRotation& arguments,
                                 std::optional<OutputTolerance> declared_tolerance)
    : functions_(functions),
      arguments_(arguments),
      declared_tolerance_(declared_tolerance),
      slots_(functions) {}

void ReturnedOutputs::Hold(int /*fn*/, py::object value) {
  held_ = std::move(value);
}

StatusOr<std::vector<ReturnedOutputs::Leaf>> ReturnedOutputs::TakeLeaves(bool note_unchecked) {
  Flattened flat;
  Flatten(held_, "return", 0, flat);
  held_ = py::object();
  std::vector<std::string>& skipped = flat.skipped;
  std::vector<Leaf> leaves;
  for (Found& f : flat.found) {
    StatusOr<std::unique_ptr<ExportedTensor>> exported = [&] {
      try {
        return TorchExchange::Export(f.object);
      } catch (py::error_already_set& error) {
        return StatusOr<std::unique_ptr<ExportedTensor>>(
            InvalidArgumentError(std::string("DLPack export failed: ") + error.what()));
      }
    }();
    if (!exported.ok()) {
      skipped.push_back(f.path + " (" + exported.status().message() + ")");
    } else if (!(*exported)->on_cuda() || !(*exported)->contiguous()) {
      skipped.push_back(f.path + " (not a contiguous CUDA tensor)");
    } else {
      leaves.push_back({f.path, std::move(exported).value(), std::move(f.object)});
    }
  }
  if (note_unchecked) {
    for (std::string& s : skipped) {
      if (std::find(unchecked_.begin(), unchecked_.end(), s) == unchecked_.end()) {
        unchecked_.push_back(std::move(s));
      }
    }
  }
  return leaves;
}

Status ReturnedOutputs::TakeReference(int fn) {
  KC_RETURN_IF_ERROR(Synchronize());
  KC_ASSIGN_OR_RETURN(std::vector<Leaf> leaves, TakeLeaves(true));
  std::vector<Slot>& slots = slots_[fn];
  slots.clear();
  for (Leaf& leaf : leaves) {
    Slot slot;
    slot.path = leaf.path;
    slot.type = leaf.tensor->type();
    slot.bytes = leaf.tensor->bytes();
    slot.shape = ShapeOf(*leaf.tensor);
    if (arguments_.Overlaps(leaf.tensor->data(), leaf.tensor->bytes())) {
      slot.kind = Kind::kAlias;
    } else {
      KC_ASSIGN_OR_RETURN(slot.reference, AllocateDeviceBuffer(slot.bytes));
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.reference->data(), leaf.tensor->data(),
                                              slot.bytes, cudaMemcpyDeviceToDevice, kStream));
    }
    slot.first_data = leaf.tensor->data();
    slot.held = std::move(leaf.object);  // keeps the storage for FindReused
    slots.push_back(std::move(slot));
  }
  return Synchronize();
}

StatusOr<bool> ReturnedOutputs::FindReused(int fn) {
  KC_RETURN_IF_ERROR(Synchronize());
  KC_ASSIGN_OR_RETURN(std::vector<Leaf> leaves, TakeLeaves(false));
  bool any = false;
  for (Slot& slot : slots_[fn]) {
    if (slot.kind != Kind::kChecked) continue;
    for (const Leaf& leaf : leaves) {
      // The reference call's tensor is still held, so equal addresses are the same storage.
      if (leaf.path != slot.path || leaf.tensor->data() != slot.first_data) continue;
      // Returned again: keep what it holds, and see whether a call rewrites zeros.
      KC_ASSIGN_OR_RETURN(slot.saved, AllocateDeviceBuffer(slot.bytes));
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.saved->data(), slot.first_data, slot.bytes,
                                              cudaMemcpyDeviceToDevice, kStream));
      KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(slot.first_data, 0, slot.bytes, kStream));
      slot.reused_data = slot.first_data;
      any = true;
    }
  }
  KC_RETURN_IF_ERROR(Synchronize());
  return any;
}

Status ReturnedOutputs::SettleReused(int fn, bool third_call_completed) {
  KC_RETURN_IF_ERROR(Synchronize());
  Drop();
  std::vector<Slot>& slots = slots_[fn];
  KC_ASSIGN_OR_RETURN(DeviceCounters written,
                      DeviceCounters::Create<unsigned long long>(slots.size() + 1));
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].reused_data == nullptr) continue;
    KC_RETURN_IF_ERROR(EnqueueCountBytesOtherThan(slots[i].reused_data, slots[i].bytes, 0,
                                                  written.at<unsigned long long>(i), kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, written.Read<unsigned long long>());
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.reused_data != nullptr && (counts[i] == 0 || !third_call_completed)) {
      // Not written by the call (or unknown): what it held goes back.
      if (third_call_completed) slot.kind = Kind::kConstant;
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.reused_data, slot.saved->data(), slot.bytes,
                                              cudaMemcpyDeviceToDevice, kStream));
    }
    slot.saved.reset();
    slot.reused_data = nullptr;
    slot.held = py::object();
  }
  return Synchronize();
}

std::optional<std::string> ReturnedOutputs::DifferentShape(int fn,
                                                           const std::vector<Leaf>& leaves) const {
  const std::vector<Slot>& slots = slots_[fn];
  if (leaves.size() != slots.size()) {
    return "returned " + std::to_string(leaves.size()) +
           " CUDA tensors where the reference call "
           "returned " +
           std::to_string(slots.size());
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const Leaf& leaf = leaves[i];
    const Slot& slot = slots[i];
    if (leaf.path != slot.path || leaf.tensor->bytes() != slot.bytes ||
        ShapeOf(*leaf.tensor) != slot.shape || leaf.tensor->type().code != slot.type.code ||
        leaf.tensor->type().bits != slot.type.bits) {
      return "returned " + leaf.path + " of shape " + ShapeText(ShapeOf(*leaf.tensor)) +
             " where the reference call returned " + slot.path + " of shape " +
             ShapeText(slot.shape) + " (or another dtype)";
    }
  }
  return std::nullopt;
}

Status ReturnedOutputs::Poison(int fn, const std::vector<Leaf>& leaves) {
  const std::vector<Slot>& slots = slots_[fn];
  for (size_t i = 0; i < leaves.size() && i < slots.size(); ++i) {
    if (slots[i].kind != Kind::kChecked) continue;
    KC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(leaves[i].tensor->data(), kPoisonByte, leaves[i].tensor->bytes(), kStream));
  }
  return Status::Ok();
}

Status ReturnedOutputs::AfterFirstCall(int fn) {
  KC_ASSIGN_OR_RETURN(std::vector<Leaf> leaves, TakeLeaves(false));
  if (std::optional<std::string> different = DifferentShape(fn, leaves)) {
    first_call_failures_.push_back("the first checked call " + *different);
    return Status::Ok();
  }
  std::vector<Slot>& slots = slots_[fn];
  if (slots.empty()) return Status::Ok();
  KC_ASSIGN_OR_RETURN(DeviceCounters spreads, DeviceCounters::Create<SpreadCounters>(slots.size()));
  KC_ASSIGN_OR_RETURN(DeviceCounters mismatches,
                      DeviceCounters::Create<unsigned long long>(slots.size()));
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].kind != Kind::kChecked) continue;
    KC_RETURN_IF_ERROR(EnqueueSpread(leaves[i].tensor->data(), slots[i].reference->data(),
                                     slots[i].bytes, slots[i].type, spreads.at<SpreadCounters>(i),
                                     kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<SpreadCounters> spread, spreads.Read<SpreadCounters>());
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.kind != Kind::kChecked) continue;
    slot.tolerance = ChooseTolerance(slot.type, ToSpread(spread[i]), declared_tolerance_);
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(leaves[i].tensor->data(), slot.reference->data(),
                                              slot.bytes, slot.type, slot.tolerance.tolerance,
                                              mismatches.at<unsigned long long>(i), kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts,
                      mismatches.Read<unsigned long long>());
  for (size_t i = 0; i < slots.size(); ++i) {
    if (counts[i] == 0) continue;
    first_call_failures_.push_back("the first checked " + std::string(fn == 1 ? "reference " : "") +
                                   "call's " + slots[i].path +
                                   " differs from the reference call's in " +
                                   std::to_string(counts[i]) + " elements " + kMismatchCauses);
    break;
  }
  KC_RETURN_IF_ERROR(Poison(fn, leaves));
  return Synchronize();  // before the tensors go back to torch's allocator
}

Status ReturnedOutputs::BeginTimed(int64_t timed_calls) {
  timed_calls_ = timed_calls;
  KC_ASSIGN_OR_RETURN(counters_,
                      DeviceCounters::Create<unsigned long long>(functions_ * timed_calls + 1));
  return Status::Ok();
}

Status ReturnedOutputs::AfterTimedCall(int fn, int64_t slot_index) {
  KC_ASSIGN_OR_RETURN(std::vector<Leaf> leaves, TakeLeaves(false));
  if (std::optional<std::string> different = DifferentShape(fn, leaves)) {
    if (shape_failures_.empty()) {
      shape_failures_.push_back("timed call " + std::to_string(slot_index) + " " + *different);
    }
    return Status::Ok();
  }
  const std::vector<Slot>& slots = slots_[fn];
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].kind != Kind::kChecked) continue;
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(
        leaves[i].tensor->data(), slots[i].reference->data(), slots[i].bytes, slots[i].type,
        slots[i].tolerance.tolerance,
        counters_.at<unsigned long long>(fn * timed_calls_ + slot_index), kStream));
  }
  return Poison(fn, leaves);
}

Status ReturnedOutputs::Finish(CheckFindings& findings) {
  for (const std::string& failure : first_call_failures_)
    findings.failures.push_back(failure);
  for (const std::string& failure : shape_failures_)
    findings.failures.push_back(failure);
  if (counters_.empty()) return Status::Ok();
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, counters_.Read<unsigned long long>());
  for (int f = 0; f < functions_; ++f) {
    for (int64_t slot = 0; slot < timed_calls_; ++slot) {
      const unsigned long long bad = counts[f * timed_calls_ + slot];
      if (bad == 0) continue;
      findings.failures.push_back("timed " + std::string(f == 1 ? "reference " : "") + "call " +
                                  std::to_string(slot) +
                                  " returned tensors that differ from the reference call's in " +
                                  std::to_string(bad) + " elements " + kMismatchCauses);
      break;
    }
  }
  for (const std::string& path : unchecked_)
    findings.unchecked.push_back(path + " is not checked");
  return Status::Ok();
}

int ReturnedOutputs::checked(int fn) const {
  return static_cast<int>(std::count_if(slots_[fn].begin(), slots_[fn].end(),
                                        [](const Slot& s) { return s.kind == Kind::kChecked; }));
}

int ReturnedOutputs::constants(int fn) const {
  return static_cast<int>(std::count_if(slots_[fn].begin(), slots_[fn].end(),
                                        [](const Slot& s) { return s.kind == Kind::kConstant; }));
}

const DeviceBuffer* ReturnedOutputs::FirstReference(int fn, ElementType* type) const {
  for (const Slot& slot : slots_[fn]) {
    if (slot.kind != Kind::kChecked) continue;
    *type = slot.type;
    return slot.reference.get();
  }
  return nullptr;
}

std::optional<ToleranceChoice> ReturnedOutputs::FirstTolerance() const {
  for (const Slot& slot : slots_[0]) {
    if (slot.kind == Kind::kChecked) return slot.tolerance;
  }
  return std::nullopt;
}

nlohmann::json ReturnedOutputs::Describe() const {
  nlohmann::json out = {{"checked", nlohmann::json::array()},
                        {"constants", nlohmann::json::array()},
                        {"aliases_of_arguments", nlohmann::json::array()},
                        {"unchecked", unchecked_}};
  for (const Slot& slot : slots_[0]) {
    const char* key = slot.kind == Kind::kChecked    ? "checked"
                      : slot.kind == Kind::kConstant ? "constants"
                                                     : "aliases_of_arguments";
    out[key].push_back(slot.path);
  }
  return out;
}

}  // namespace kc::native
