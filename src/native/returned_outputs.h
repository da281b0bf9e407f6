// ReturnedOutputs: the tensors a benchmarked function returns, checked like output arguments
// (docs/benchmark-integrity.md "Fresh inputs, checked outputs").
//
// KernelBench's convention is inputs in, a new tensor out: `forward(a, b)` returns `a + b`, or a
// tuple, list or dict of tensors. Each CUDA tensor in the return value is found by path:
// "return", "return[1]", "return['out']", "return.logits"; through tuples, lists, dicts (and
// their subclasses: OrderedDict, Hugging Face's ModelOutput) and objects' instance dicts, at most
// 4 levels and 64 tensors. torch.Tensor subclasses (nn.Parameter, a lazy tensor) are checked for
// what their storage holds, and views with gaps element by element (strided_copy.h). Each is
// compared on the device with the reference call's tensor at the same path, for the call's
// input variant (argument_rotation.h), within the tolerance chosen from the first calls
// (output_tolerance.h). After its check, a returned tensor is poisoned, so a call that returns a
// cached tensor again returns poison.
//
// Returned storage is sorted out before timing, by probes (checked_calls.h):
//   - a tensor that overlaps an argument (`torch.mul(x, 2, out=y)` returns y) is that
//     argument's business (argument_rotation.h), and is neither checked nor poisoned here;
//   - a tensor whose storage the second call returns again (a graph's static output, a cache,
//     a constant such as a scale) is zeroed before a third call: rewritten, it is checked and
//     poisoned like any other; left as it was, it is the call's constant and is restored, never
//     poisoned. A constant is excused only when small (at most 4 KiB) or declared (cfg
//     `constants`): a larger one cannot be told from a cached answer, and is unchecked.
// Paths declared in cfg `unverifiable` (random by design) are neither checked nor poisoned.
// What cannot be read (a CPU tensor, an object whose contents are not reachable) is unchecked.
#pragma once

#include <array>
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

// The largest returned constant excused without a declaration.
inline constexpr size_t kMaxUndeclaredConstantBytes = 4096;

// What cfg says of returned paths.
struct ReturnDeclarations {
  std::optional<OutputTolerance> tolerance;  // cfg tolerance
  std::vector<std::string> unverifiable;     // cfg unverifiable, the "return..." entries
  std::vector<std::string> constants;        // cfg constants
};

class ReturnedOutputs {
 public:
  ReturnedOutputs(int functions, const ArgumentRotation& arguments,
                  ReturnDeclarations declarations);

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
  // After a drained call on the fresh input values: its tensors become fn's reference for
  // variant 1. What differs when it returned another structure (nothing is taken then).
  StatusOr<std::optional<std::string>> TakeVariantReference(int fn);
  // Whether some checked tensor differs between the two variants' references; nullopt when
  // there is none to compare.
  StatusOr<std::optional<bool>> OutputsFollowInputs(int fn) const;

  // After a drained call on values never seen (unseen_values.h): whether every checked tensor
  // the held value returns equals fn's reference on the caller's values, bit for bit (nullopt:
  // none checked). Lets the value go.
  StatusOr<std::optional<bool>> HeldAnsweredAsCaller(int fn);
  // -- Around the calls (CallHooks, through checked_calls.h). --
  Status BeforeCall() {
    Drop();  // an untimed call's value
    return Status::Ok();
  }
  Status AfterFirstCall(int fn, int variant);
  bool WantsSpreadCall(int fn) const;
  Status BeginTimed(int64_t timed_calls);
  Status AfterTimedCall(int fn, int64_t slot, int variant);
  Status Finish(CheckFindings& findings);

  bool declares_unverifiable() const { return !declared_.unverifiable.empty(); }
  // Tensors of fn's return value that are checked; and constants (returned, never written).
  int checked(int fn) const;
  int constants(int fn) const;
  // Bytes of fn's checked returned tensors (each is written by every call).
  uint64_t checked_bytes(int fn) const;
  std::optional<ToleranceChoice> FirstTolerance() const;
  // {"checked": [paths], "constants": [paths], "aliases_of_arguments": [paths],
  //  "unverifiable": [paths], "unchecked": [paths with reasons]}
  nlohmann::json Describe() const;
  // Function `fn`'s reference of its first checked returned tensor; null when there is none.
  const DeviceBuffer* FirstReference(int fn, ElementType* type) const;

 private:
  enum class Kind { kChecked, kConstant, kAlias, kUnverifiable };
  struct Slot {
    std::string path;
    Kind kind = Kind::kChecked;
    ElementType type;
    size_t bytes = 0;       // of the elements
    size_t span_bytes = 0;  // from the first element to the end of the last
    std::vector<int64_t> shape;
    std::array<std::shared_ptr<DeviceBuffer>, 2> reference;  // per variant, contiguous
    std::shared_ptr<DeviceBuffer> gathered;                  // a view's elements, for its checks
    ToleranceChoice tolerance;
    ReferenceSpread spread;
    int first_calls = 0;
    pybind11::object held;  // during probing: the reference call's tensor, kept alive
    void* first_data = nullptr;
    std::shared_ptr<DeviceBuffer> saved;  // reused storage's span, while zeroed
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
  // The leaf's elements, contiguous: its own memory, or gathered into the slot's buffer.
  StatusOr<const void*> Elements(const Leaf& leaf, Slot& slot);
  Status Poison(int fn, const std::vector<Leaf>& leaves);
  bool Declared(const std::vector<std::string>& paths, const std::string& path) const;

  int functions_;
  const ArgumentRotation& arguments_;
  ReturnDeclarations declared_;
  pybind11::object held_;
  std::vector<std::vector<Slot>> slots_;  // per function
  std::vector<std::string> unchecked_;
  std::vector<std::string> first_call_failures_;
  DeviceCounters counters_;  // [fn][slot] mismatch counts of the timed calls
  int64_t timed_calls_ = 0;
  std::vector<std::string> shape_failures_;
};

}  // namespace kc::native
