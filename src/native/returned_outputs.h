// ReturnedOutputs: the tensors a benchmarked function returns, checked like output arguments
// (docs/benchmark-integrity.md "Fresh inputs, checked outputs").
//
// KernelBench's convention is inputs in, a new tensor out: `forward(a, b)` returns `a + b`, or a
// tuple, list or dict of tensors. Each CUDA torch.Tensor in the return value (found by path:
// "return", "return[1]", "return['out']"; at most 4 levels and 64 tensors) is compared on the
// device with the reference call's tensor at the same path, within the tolerance chosen from two
// calls (output_tolerance.h). After its check, a returned tensor is poisoned, so a call that
// returns a cached tensor again returns poison.
//
// Returned storage is sorted out before timing, by probes (checked_calls.h):
//   - a tensor that overlaps an argument (`torch.mul(x, 2, out=y)` returns y) is that
//     argument's business (argument_rotation.h), and is neither checked nor poisoned here;
//   - a tensor whose storage the second call returns again (a graph's static output, a cache,
//     a constant such as a scale) is zeroed before a third call: rewritten, it is checked and
//     poisoned like any other; left as it was, it is the call's constant (or a cached result)
//     and is restored, never poisoned, and not counted as an output (checked_calls.h flags a
//     call whose only outputs are such tensors).
// Tensors we cannot check (not on CUDA, not contiguous, a subclass) are named in `unchecked`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include "base/status.h"
#include "native/argument_rotation.h"
#include "native/device_counters.h"
#include "native/dlpack_tensor.h"
#include "native/output_tolerance.h"

namespace kc::native {

class ReturnedOutputs {
 public:
  ReturnedOutputs(int functions, const ArgumentRotation& arguments,
                  std::optional<OutputTolerance> declared_tolerance);

  // Inside a (possibly timed) call: keeps the value and does nothing else.
  void Hold(int fn, pybind11::object value);
  // Forgets the held value (a probe call from zeros).
  void Drop() { held_ = pybind11::object(); }

  // -- Probing, after a drained call of `fn` from the caller's values. --
  // The held value's tensors become fn's reference; they stay held for FindReused.
  Status TakeReference(int fn);
  // After a second call: which returned tensors share storage with the reference call's.
  // Returns true when some do; they are then zeroed (their contents kept) for a third call.
  StatusOr<bool> FindReused(int fn);
  // After the third call: reused storage the call rewrote is checked from now on; the rest is
  // the call's constant and gets its contents back. Without a completed third call, reused
  // storage gets its contents back and stays checked. Releases the reference call's tensors.
  Status SettleReused(int fn, bool third_call_completed);

  // -- Around the calls (CallHooks, through checked_calls.h). --
  Status BeforeCall() {
    Drop();  // an untimed call's value
    return Status::Ok();
  }
  Status AfterFirstCall(int fn);
  Status BeginTimed(int64_t timed_calls);
  Status AfterTimedCall(int fn, int64_t slot);
  Status Finish(CheckFindings& findings);

  // Tensors of fn's return value that are checked; and constants (returned, never written).
  int checked(int fn) const;
  int constants(int fn) const;
  std::optional<ToleranceChoice> FirstTolerance() const;
  // {"checked": [paths], "constants": [paths], "aliases_of_arguments": [paths],
  //  "unchecked": [paths with reasons]}
  nlohmann::json Describe() const;
  // Function `fn`'s reference of its first checked returned tensor; null when there is none.
  const DeviceBuffer* FirstReference(int fn, ElementType* type) const;

 private:
  enum class Kind { kChecked, kConstant, kAlias };
  struct Slot {
    std::string path;
    Kind kind = Kind::kChecked;
    ElementType type;
    size_t bytes = 0;
    std::vector<int64_t> shape;
    std::shared_ptr<DeviceBuffer> reference;
    ToleranceChoice tolerance;
    pybind11::object held;  // during probing: the reference call's tensor, kept alive
    void* first_data = nullptr;
    std::shared_ptr<DeviceBuffer> saved;  // reused storage's contents, while zeroed
    void* reused_data = nullptr;
  };
  struct Leaf {
    std::string path;
    std::unique_ptr<ExportedTensor> tensor;
    pybind11::object object;
  };

  // The held value's checkable tensors, in path order; what cannot be checked is noted.
  StatusOr<std::vector<Leaf>> TakeLeaves(bool note_unchecked);
  // Leaves must match the reference's paths, types and shapes; a description of the first
  // difference otherwise.
  std::optional<std::string> DifferentShape(int fn, const std::vector<Leaf>& leaves) const;
  Status Poison(int fn, const std::vector<Leaf>& leaves);

  int functions_;
  const ArgumentRotation& arguments_;
  std::optional<OutputTolerance> declared_tolerance_;
  pybind11::object held_;
  std::vector<std::vector<Slot>> slots_;  // per function
  std::vector<std::string> unchecked_;
  std::vector<std::string> first_call_failures_;
  DeviceCounters counters_;  // [fn][slot] mismatch counts of the timed calls
  int64_t timed_calls_ = 0;
  std::vector<std::string> shape_failures_;
};

}  // namespace kc::native
