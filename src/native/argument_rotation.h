// ArgumentRotation: fresh inputs and checked output arguments for every call of a benchmark
// (docs/benchmark-integrity.md "Fresh inputs, checked outputs").
//
// The call's torch.Tensor arguments get `sets` independent copies (device buffers of our own);
// call k uses set k % sets, and the caller's tensors are never passed, so nothing the checks
// write reaches them. Which arguments are outputs is decided from evidence before timing
// (checked_calls.h runs the probes through the primitives below), never by position:
//   - kRestored: an output the call also reads (it changed under a call from the caller's
//     values, and a call from zeros gives another result): it starts every call from the
//     caller's values, which differ from its result, so a skipped call still shows;
//   - kPoisoned: an output the call writes whatever it held (a call from zeros gives the
//     reference), or one cfg `outputs` declares: it is filled with poison (all bits set: NaN,
//     -1) before every call;
//   - kInput: never written, never poisoned, and it must come out of the benchmark as it went in.
// Every timed call's outputs are compared on the device with the function's reference (the
// reference call's outputs) within the tolerance that output_tolerance.h chose from two calls.
// At the end the caller's outputs get the reference, as if the calls had run on them. Defeats
// result caching (keyed on values or on data_ptr), replay, and storage swaps: we hold every
// buffer ourselves, so y.set_() redirects only the Python object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include "base/status.h"
#include "native/device_counters.h"
#include "native/dlpack_tensor.h"
#include "native/output_check.h"
#include "native/output_tolerance.h"

namespace kc::native {

struct RotationPlan {
  bool rotate = true;                        // cfg "rotate_inputs"
  std::optional<std::vector<int>> outputs;   // cfg "outputs": argument indices
  std::optional<OutputTolerance> tolerance;  // cfg "tolerance"
  int64_t max_copy_bytes = int64_t{4} << 30;
  size_t target_bytes = 0;  // rotate through at least this much memory (2 x L2)
  int max_sets = 8;
};

// What the checks found. failures: proof that a call's outputs differ (the benchmark fails with
// kind `correctness`); flags: evidence against the measurement (not trusted); unchecked: outputs
// that could not be checked, said plainly (trusted stays as it is).
struct CheckFindings {
  std::vector<std::string> failures;
  std::vector<std::string> flags;
  std::vector<std::string> unchecked;
};

enum class OutputMode { kInput, kRestored, kPoisoned };

class ArgumentRotation {
 public:
  // `functions`: how many callables share the arguments (1, or 2 for a paired benchmark).
  static StatusOr<std::unique_ptr<ArgumentRotation>> Create(const pybind11::tuple& args,
                                                            const RotationPlan& plan,
                                                            int functions);
  ~ArgumentRotation();

  int sets() const { return static_cast<int>(sets_.size()); }
  const pybind11::tuple& Arguments(int64_t call) const { return sets_[SetOf(call)]; }
  size_t tensors() const { return tensors_.size(); }
  // Probing needs copies: without them set 0 is the caller's own tensors.
  bool can_probe() const { return copied_ && !tensors_.empty(); }
  const std::optional<std::vector<int>>& declared_outputs() const { return declared_outputs_; }
  // True when [data, data + bytes) overlaps one of our copies or a caller's tensor.
  bool Overlaps(const void* data, size_t bytes) const;

  // -- Probing, on set 0 (checked_calls.h). All synchronous. --
  // Set 0 back to the caller's values.
  Status ResetFirstSet();
  // Per tensor argument: does set 0 differ from the caller's values (bit for bit)?
  StatusOr<std::vector<bool>> FirstSetChanged();
  Status ZeroInFirstSet(size_t tensor);
  // Does tensor `tensor` of set 0 (after a call from zeros: did the call write anything), or
  // the caller's tensor, hold a byte other than 0?
  StatusOr<bool> FirstSetNonZero(size_t tensor);
  StatusOr<bool> CallerNonZero(size_t tensor);
  // Does tensor `tensor` of set 0 equal `expected` (a device buffer of its size) bit for bit?
  StatusOr<bool> FirstSetEquals(size_t tensor, const void* expected);
  // A copy of tensor `tensor` of set 0.
  StatusOr<std::shared_ptr<DeviceBuffer>> CopyOfFirstSet(size_t tensor);
  const void* CallerData(size_t tensor) const;
  // `writers`: which functions write it (a paired benchmark's candidate may return its result
  // where the reference writes an argument); an output is checked for those only.
  void SetMode(size_t tensor, OutputMode mode, std::string found_by, std::vector<bool> writers);
  OutputMode Mode(size_t tensor) const { return tensors_[tensor].mode; }
  // Outputs as cfg `outputs` declares them (kPoisoned), or nothing for lack of a declaration.
  void ApplyDeclaredOutputs();
  // Function `fn`'s reference: its outputs in set 0 now (after a reference call), or `given`
  // for an output whose reference was taken earlier (the probe's copy).
  Status TakeReference(int fn, const std::vector<std::shared_ptr<DeviceBuffer>>& given = {});
  bool has_outputs() const;

  // -- Around the calls, stream-ordered (CallHooks, through checked_calls.h). --
  // Poisons or restores the outputs of the set `call` uses.
  Status BeforeCall(int64_t call);
  // After `fn`'s first checked call, drained: the spread against the reference chooses each
  // output's tolerance, and the call itself is checked with it.
  Status AfterFirstCall(int fn, int64_t call);
  Status BeginTimed(int64_t timed_calls);
  // Enqueues the comparison of `call`'s outputs with `fn`'s reference into counter `slot`.
  Status AfterTimedCall(int fn, int64_t call, int64_t slot);
  // Reads the counters and checks the inputs; the device must be idle.
  Status Finish(CheckFindings& findings);
  // Function `fn`'s reference of its first output argument, with its element type and size;
  // null when it writes none.
  const DeviceBuffer* FirstReference(int fn, ElementType* type) const;

  nlohmann::json Describe() const;
  // The tolerance of the first checked output (for the report); default when there is none.
  std::optional<ToleranceChoice> FirstTolerance() const;

 private:
  struct Argument {
    int index = 0;
    OutputMode mode = OutputMode::kInput;
    std::string found_by;
    std::unique_ptr<ExportedTensor> original;              // the caller's tensor
    std::vector<std::shared_ptr<DeviceBuffer>> copies;     // one per set, when copied_
    std::vector<std::shared_ptr<DeviceBuffer>> reference;  // per function, outputs only
    std::vector<ToleranceChoice> tolerance;                // per function, outputs only
    std::vector<bool> writers;                             // per function
    bool output() const { return mode != OutputMode::kInput; }
    bool checked_for(int fn) const { return output() && writers[fn]; }
  };

  ArgumentRotation() = default;
  int SetOf(int64_t call) const {
    return static_cast<int>(call % static_cast<int64_t>(sets_.size()));
  }
  void* DataOf(const Argument& a, int set) const;
  Status CheckFirstCall(int fn, int set);

  std::vector<pybind11::tuple> sets_;
  bool copied_ = true;  // false: the copies exceed the budget, and the calls use the caller's
  std::optional<std::vector<int>> declared_outputs_;
  std::optional<OutputTolerance> declared_tolerance_;
  std::vector<Argument> tensors_;  // rotated tensor arguments, in argument order
  std::vector<int> not_rotated_;   // tensor-like arguments we could not copy
  std::vector<std::string> notes_;
  int functions_ = 1;
  DeviceCounters counters_;  // [fn][slot] mismatch counts of the timed calls
  int64_t timed_calls_ = 0;
  std::vector<std::string> first_call_failures_;
  std::vector<std::string> first_call_flags_;
};

}  // namespace kc::native
