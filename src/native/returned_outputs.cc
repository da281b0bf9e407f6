#include "native/returned_outputs.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "native/cuda_status.h"
#include "native/element_source.h"
#include "native/output_check.h"
#include "native/strided_copy.h"

namespace kc::native {
namespace py = pybind11;
namespace {

constexpr cudaStream_t kStream = 0;  // the timer's stream (cupti_timer.cc)
constexpr int kMaxDepth = 4;
constexpr size_t kMaxTensors = 64;
constexpr OutputTolerance kExact{0.0f, 0.0f};
constexpr ElementType kByte{1, 8};

struct Found {
  std::string path;
  py::object object;
};

// The tensors of a return value, by path, and what could not be looked at.
struct Flattened {
  std::vector<Found> found;
  std::vector<PyObject*> seen;  // a tensor reachable twice (an item and an attribute) counts once
  std::vector<std::string> skipped;
  bool truncated = false;
};

void Flatten(py::handle value, const std::string& path, int depth, Flattened& out);

// A dict's items (a dict subclass's too, read as a dict), named after their keys.
void FlattenDict(PyObject* dict, const std::string& path, bool attributes, int depth,
                 Flattened& out) {
  PyObject* key = nullptr;
  PyObject* item = nullptr;
  Py_ssize_t position = 0;
  int index = 0;
  while (PyDict_Next(dict, &position, &key, &item)) {
    const char* text = PyUnicode_CheckExact(key) ? PyUnicode_AsUTF8(key) : nullptr;
    if (text == nullptr) PyErr_Clear();
    const std::string name = text == nullptr ? "[#" + std::to_string(index) + "]"
                             : attributes    ? "." + std::string(text).substr(0, 64)
                                             : "['" + std::string(text).substr(0, 64) + "']";
    Flatten(item, path + name, depth + 1, out);
    ++index;
  }
}

// Reads containers without running their Python code (no __iter__, no __getitem__, no
// __getattr__): tuples and lists by their items, dicts by PyDict_Next, other objects by their
// instance dict.
void Flatten(py::handle value, const std::string& path, int depth, Flattened& out) {
  PyObject* object = value.ptr();
  if (TorchExchange::IsTensorInstance(value)) {
    if (std::find(out.seen.begin(), out.seen.end(), object) != out.seen.end()) return;
    out.seen.push_back(object);
    if (out.found.size() < kMaxTensors) {
      out.found.push_back({path, py::reinterpret_borrow<py::object>(value)});
    } else if (!out.truncated) {
      out.truncated = true;
      out.skipped.push_back(path + " and later tensors (over " + std::to_string(kMaxTensors) + ")");
    }
    return;
  }
  if (object == Py_None || PyBool_Check(object) || PyLong_Check(object) || PyFloat_Check(object) ||
      PyComplex_Check(object) || PyUnicode_Check(object) || PyBytes_Check(object)) {
    return;
  }
  if (depth >= kMaxDepth) {
    out.skipped.push_back(path + " (nested deeper than " + std::to_string(kMaxDepth) + " levels)");
    return;
  }
  if (PyTuple_Check(object) || PyList_Check(object)) {
    const bool tuple = PyTuple_Check(object);
    const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(object) : PyList_GET_SIZE(object);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = tuple ? PyTuple_GET_ITEM(object, i) : PyList_GET_ITEM(object, i);
      Flatten(item, path + "[" + std::to_string(i) + "]", depth + 1, out);
    }
    if (tuple || PyList_CheckExact(object)) return;
  }
  if (PyDict_Check(object)) {
    FlattenDict(object, path, false, depth, out);
    if (PyDict_CheckExact(object)) return;
  }
  // An object's attributes, read from its instance dict (Hugging Face's ModelOutput keeps its
  // fields there as well as in the dict it is).
  const PyTypeObject* type = Py_TYPE(object);
  if (type->tp_dictoffset != 0 || (type->tp_flags & Py_TPFLAGS_MANAGED_DICT) != 0) {
    PyObject* attributes = PyObject_GenericGetDict(object, nullptr);
    if (attributes != nullptr) {
      if (PyDict_Check(attributes)) FlattenDict(attributes, path, true, depth, out);
      Py_DECREF(attributes);
      return;
    }
    PyErr_Clear();
  }
  // A class of the program's own whose contents are out of reach (slots, a custom mapping);
  // built-in and extension objects (numbers, dtypes, devices) hold no CUDA tensor we return.
  if ((type->tp_flags & Py_TPFLAGS_HEAPTYPE) != 0 && !PyTuple_Check(object) &&
      !PyList_Check(object) && !PyDict_Check(object)) {
    out.skipped.push_back(path + " (an object of type " + std::string(type->tp_name).substr(0, 64) +
                          " whose contents are not read)");
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

Status Copy(void* to, const void* from, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, kStream));
  return Status::Ok();
}

// Fills a tensor's elements (never the gaps of a view) with `byte`.
Status Fill(const ExportedTensor& tensor, uint8_t byte) {
  if (!tensor.contiguous()) return EnqueueStridedFill(tensor.dl(), byte, kStream);
  if (tensor.bytes() == 0) return Status::Ok();
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(tensor.data(), byte, tensor.bytes(), kStream));
  return Status::Ok();
}

}  // namespace

ReturnedOutputs::ReturnedOutputs(int functions, const ArgumentRotation& arguments,
                                 ReturnDeclarations declarations)
    : functions_(functions),
      arguments_(arguments),
      declared_(std::move(declarations)),
      slots_(functions) {}

void ReturnedOutputs::Hold(int /*fn*/, py::object value) {
  held_ = std::move(value);
}

bool ReturnedOutputs::Declared(const std::vector<std::string>& paths,
                               const std::string& path) const {
  return std::any_of(paths.begin(), paths.end(), [&](const std::string& declared) {
    if (path.compare(0, declared.size(), declared) != 0) return false;
    return path.size() == declared.size() || path[declared.size()] == '[' ||
           path[declared.size()] == '.';
  });
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
        return TorchExchange::ExportInstance(f.object);
      } catch (py::error_already_set& error) {
        return StatusOr<std::unique_ptr<ExportedTensor>>(
            InvalidArgumentError(std::string("DLPack export failed: ") + error.what()));
      }
    }();
    if (!exported.ok()) {
      skipped.push_back(f.path + " (" + exported.status().message() + ")");
    } else if (!(*exported)->on_cuda()) {
      skipped.push_back(f.path + " (not a CUDA tensor)");
    } else if (!(*exported)->contiguous() && !CanWalk((*exported)->dl())) {
      skipped.push_back(f.path + " (a view whose layout cannot be walked)");
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

StatusOr<const void*> ReturnedOutputs::Elements(const Leaf& leaf, Slot& slot) {
  if (leaf.tensor->contiguous()) return static_cast<const void*>(leaf.tensor->data());
  if (slot.gathered == nullptr) {
    KC_ASSIGN_OR_RETURN(slot.gathered, AllocateDeviceBuffer(slot.bytes));
  }
  KC_RETURN_IF_ERROR(EnqueueGather(leaf.tensor->dl(), slot.gathered->data(), kStream));
  return static_cast<const void*>(slot.gathered->data());
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
    slot.span_bytes = leaf.tensor->span_bytes();
    slot.shape = ShapeOf(*leaf.tensor);
    if (Declared(declared_.unverifiable, slot.path)) {
      slot.kind = Kind::kUnverifiable;
    } else if (arguments_.Overlaps(leaf.tensor->data(), slot.span_bytes)) {
      slot.kind = Kind::kAlias;
    } else {
      KC_ASSIGN_OR_RETURN(slot.reference[0], AllocateDeviceBuffer(slot.bytes));
      KC_ASSIGN_OR_RETURN(const void* elements, Elements(leaf, slot));
      KC_RETURN_IF_ERROR(Copy(slot.reference[0]->data(), elements, slot.bytes));
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
      KC_ASSIGN_OR_RETURN(slot.saved, AllocateDeviceBuffer(slot.span_bytes));
      KC_RETURN_IF_ERROR(Copy(slot.saved->data(), slot.first_data, slot.span_bytes));
      KC_RETURN_IF_ERROR(Fill(*leaf.tensor, 0));
      slot.reused_data = slot.first_data;
      any = true;
    }
  }
  KC_RETURN_IF_ERROR(Synchronize());
  return any;
}

Status ReturnedOutputs::SettleReused(int fn, bool third_call_completed) {
  KC_RETURN_IF_ERROR(Synchronize());
  std::vector<Slot>& slots = slots_[fn];
  // What the third call returned: its views are gathered to count what it wrote over zeros.
  std::vector<Leaf> leaves;
  if (third_call_completed) {
    KC_ASSIGN_OR_RETURN(leaves, TakeLeaves(false));
  }
  Drop();
  KC_ASSIGN_OR_RETURN(DeviceCounters written,
                      DeviceCounters::Create<unsigned long long>(slots.size() + 1));
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.reused_data == nullptr) continue;
    const void* elements = slot.reused_data;
    for (const Leaf& leaf : leaves) {
      if (leaf.path == slot.path && leaf.tensor->data() == slot.reused_data) {
        KC_ASSIGN_OR_RETURN(elements, Elements(leaf, slot));
      }
    }
    KC_RETURN_IF_ERROR(EnqueueCountBytesOtherThan(elements, slot.bytes, 0,
                                                  written.at<unsigned long long>(i), kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, written.Read<unsigned long long>());
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.reused_data != nullptr && (counts[i] == 0 || !third_call_completed)) {
      // Not written by the call (or unknown): what it held goes back.
      if (third_call_completed) {
        slot.kind = Kind::kConstant;
        if (slot.bytes > kMaxUndeclaredConstantBytes && !Declared(declared_.constants, slot.path)) {
          unchecked_.push_back(
              slot.path +
              " (returned unchanged on every call, the same storage not written by a "
              "call: " +
              std::to_string(slot.bytes) +
              " bytes, over 4 KiB, so a cached answer cannot be told from a constant; declare "
              "it in cfg 'constants' if it is one)");
        }
      }
      KC_RETURN_IF_ERROR(Copy(slot.reused_data, slot.saved->data(), slot.span_bytes));
    }
    slot.saved.reset();
    slot.reused_data = nullptr;
    slot.held = py::object();
  }
  leaves.clear();
  return Synchronize();
}

StatusOr<std::optional<std::string>> ReturnedOutputs::TakeVariantReference(int fn) {
  KC_RETURN_IF_ERROR(Synchronize());
  KC_ASSIGN_OR_RETURN(std::vector<Leaf> leaves, TakeLeaves(false));
  if (std::optional<std::string> different = DifferentShape(fn, leaves)) return different;
  std::vector<Slot>& slots = slots_[fn];
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.kind != Kind::kChecked) continue;
    KC_ASSIGN_OR_RETURN(slot.reference[1], AllocateDeviceBuffer(slot.bytes));
    KC_ASSIGN_OR_RETURN(const void* elements, Elements(leaves[i], slot));
    KC_RETURN_IF_ERROR(Copy(slot.reference[1]->data(), elements, slot.bytes));
  }
  KC_RETURN_IF_ERROR(Poison(fn, leaves));
  KC_RETURN_IF_ERROR(Synchronize());
  return std::optional<std::string>();
}

StatusOr<std::optional<bool>> ReturnedOutputs::OutputsFollowInputs(int fn) const {
  KC_ASSIGN_OR_RETURN(DeviceCounters differing,
                      DeviceCounters::Create<unsigned long long>(slots_[fn].size() + 1));
  bool any = false;
  for (size_t i = 0; i < slots_[fn].size(); ++i) {
    const Slot& slot = slots_[fn][i];
    if (slot.kind != Kind::kChecked || slot.reference[1] == nullptr || slot.bytes == 0) continue;
    any = true;
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(slot.reference[0]->data(), slot.reference[1]->data(),
                                              slot.bytes, kByte, kExact,
                                              differing.at<unsigned long long>(i), kStream));
  }
  if (!any) return std::optional<bool>();
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, differing.Read<unsigned long long>());
  return std::optional<bool>(
      std::any_of(counts.begin(), counts.end(), [](unsigned long long c) { return c != 0; }));
}

StatusOr<std::optional<bool>> ReturnedOutputs::HeldAnsweredAsCaller(int fn) {
  KC_ASSIGN_OR_RETURN(std::vector<Leaf> leaves, TakeLeaves(/*note_unchecked=*/false));
  std::vector<Slot>& slots = slots_[fn];
  if (std::none_of(slots.begin(), slots.end(), [](const Slot& slot) {
        return slot.kind == Kind::kChecked && slot.bytes != 0 && slot.reference[0] != nullptr;
      })) {
    return std::optional<bool>();
  }
  if (DifferentShape(fn, leaves)) return std::optional<bool>(false);
  KC_ASSIGN_OR_RETURN(DeviceCounters differing,
                      DeviceCounters::Create<unsigned long long>(slots.size() + 1));
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.kind != Kind::kChecked || slot.bytes == 0 || slot.reference[0] == nullptr) continue;
    KC_ASSIGN_OR_RETURN(const void* elements, Elements(leaves[i], slot));
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(elements, slot.reference[0]->data(), slot.bytes,
                                              kByte, kExact, differing.at<unsigned long long>(i),
                                              kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, differing.Read<unsigned long long>());
  return std::optional<bool>(
      std::all_of(counts.begin(), counts.end(), [](unsigned long long c) { return c == 0; }));
}

std::optional<std::string> ReturnedOutputs::DifferentShape(int fn,
                                                           const std::vector<Leaf>& leaves) const {
  const std::vector<Slot>& slots = slots_[fn];
  if (leaves.size() != slots.size()) {
    return "returned " + std::to_string(leaves.size()) +
           " CUDA tensors where the reference call returned " + std::to_string(slots.size());
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
    KC_RETURN_IF_ERROR(Fill(*leaves[i].tensor, kPoisonByte));
  }
  return Status::Ok();
}

Status ReturnedOutputs::AfterFirstCall(int fn, int variant) {
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
  std::vector<const void*> elements(slots.size(), nullptr);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].kind != Kind::kChecked) continue;
    KC_ASSIGN_OR_RETURN(elements[i], Elements(leaves[i], slots[i]));
    KC_RETURN_IF_ERROR(EnqueueSpread(elements[i], slots[i].reference[variant]->data(),
                                     slots[i].bytes, slots[i].type, spreads.at<SpreadCounters>(i),
                                     kStream));
  }
  KC_ASSIGN_OR_RETURN(std::vector<SpreadCounters> spread, spreads.Read<SpreadCounters>());
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& slot = slots[i];
    if (slot.kind != Kind::kChecked) continue;
    slot.spread = slot.first_calls++ == 0 ? ToSpread(spread[i])
                                          : WiderSpread(slot.spread, ToSpread(spread[i]));
    slot.tolerance = ChooseTolerance(slot.type, slot.spread, declared_.tolerance);
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(elements[i], slot.reference[variant]->data(),
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

bool ReturnedOutputs::WantsSpreadCall(int fn) const {
  if (declared_.tolerance) return false;
  return std::any_of(slots_[fn].begin(), slots_[fn].end(), [](const Slot& s) {
    return s.kind == Kind::kChecked && s.type.bits == 16 && IsFloatingType(s.type) &&
           s.spread.max_abs_diff > 0 && !s.tolerance.beyond_rounding &&
           s.first_calls < kSpreadCalls;
  });
}

Status ReturnedOutputs::BeginTimed(int64_t timed_calls) {
  timed_calls_ = timed_calls;
  KC_ASSIGN_OR_RETURN(counters_,
                      DeviceCounters::Create<unsigned long long>(functions_ * timed_calls + 1));
  return Status::Ok();
}

Status ReturnedOutputs::AfterTimedCall(int fn, int64_t slot_index, int variant) {
  KC_ASSIGN_OR_RETURN(std::vector<Leaf> leaves, TakeLeaves(false));
  if (std::optional<std::string> different = DifferentShape(fn, leaves)) {
    if (shape_failures_.empty()) {
      shape_failures_.push_back("timed call " + std::to_string(slot_index) + " " + *different);
    }
    return Status::Ok();
  }
  std::vector<Slot>& slots = slots_[fn];
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].kind != Kind::kChecked) continue;
    KC_ASSIGN_OR_RETURN(const void* elements, Elements(leaves[i], slots[i]));
    KC_RETURN_IF_ERROR(EnqueueCountMismatches(
        elements, slots[i].reference[variant]->data(), slots[i].bytes, slots[i].type,
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
  for (const std::string& path : declared_.unverifiable) {
    findings.unchecked.push_back("declared unverifiable: " + path +
                                 " (cfg unverifiable): returned, never checked");
  }
  for (const std::string& path : unchecked_)
    findings.unchecked.push_back(path + " is not checked");
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

uint64_t ReturnedOutputs::checked_bytes(int fn) const {
  uint64_t bytes = 0;
  for (const Slot& slot : slots_[fn]) {
    if (slot.kind == Kind::kChecked) bytes += slot.bytes;
  }
  return bytes;
}

const DeviceBuffer* ReturnedOutputs::FirstReference(int fn, ElementType* type) const {
  for (const Slot& slot : slots_[fn]) {
    if (slot.kind != Kind::kChecked) continue;
    *type = slot.type;
    return slot.reference[0].get();
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
                        {"unverifiable", nlohmann::json::array()},
                        {"unchecked", unchecked_}};
  for (const Slot& slot : slots_[0]) {
    const char* key = slot.kind == Kind::kChecked    ? "checked"
                      : slot.kind == Kind::kConstant ? "constants"
                      : slot.kind == Kind::kAlias    ? "aliases_of_arguments"
                                                     : "unverifiable";
    out[key].push_back(slot.path);
  }
  return out;
}

}  // namespace kc::native
