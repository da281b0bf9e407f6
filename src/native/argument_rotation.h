// ArgumentRotation: fresh inputs and checked output arguments for every call of a benchmark
// (docs/benchmark-integrity.md "Fresh inputs, checked outputs").
//
// The call's torch.Tensor arguments (contiguous or not: a view's copy spans its gaps) get `sets`
// independent copies (device buffers of our own); call k uses set k % sets, and the caller's
// tensors are never passed, so nothing the checks write reaches them. Sets alternate between two
// value variants, the caller's values and fresh ones (input_variant.h), each with its own
// reference call, so that a result that does not follow its inputs (a cache, a replayed graph's
// copy of an answer) shows.
//
// A call that writes the caller's own tensors instead of the ones it is given (a CUDA graph
// captured on them, replayed with them as arguments) is run *in place*: the caller's tensors are
// the call's arguments, and before each call the set's values are written into them; they get
// their own values back at the end. Arguments too large to copy are checked in place too. Which
// arguments are outputs is decided from evidence before timing (checked_calls.h runs the probes
// through the primitives below), never by position:
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

#include <array>
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
  std::vector<int> unverifiable;             // cfg "unverifiable": "arg:N" entries
  // Copies may take this much device memory, or half the free memory when that is more.
  int64_t max_copy_bytes = int64_t{4} << 30;
  size_t target_bytes = 0;  // rotate through at least this much memory (2 x L2)
  int max_sets = 8;
};

// What the checks found. failures: proof that a call's outputs differ (the benchmark fails with
// kind `correctness`); flags: evidence against the measurement (not trusted); unchecked: outputs
// that could not be checked, said plainly (not trusted either).
struct CheckFindings {
  std::vector<std::string> failures;
  std::vector<std::string> flags;
  std::vector<std::string> unchecked;
};

// kUnverifiable: declared random by design (cfg unverifiable): restored before each call,
// never checked.
enum class OutputMode { kInput, kRestored, kPoisoned, kUnverifiable };

// 16-bit float outputs whose first calls differ get this many calls to measure their spread.
inline constexpr int kSpreadCalls = 6;

class ArgumentRotation {
 public:
  // `functions`: how many callables share the arguments (1, or 2 for a paired benchmark).
  static StatusOr<std::unique_ptr<ArgumentRotation>> Create(const pybind11::tuple& args,
                                                            const RotationPlan& plan,
                                                            int functions);
  ~ArgumentRotation();

  int sets() const { return static_cast<int>(sets_.size()); }
  // 2 when the calls alternate the caller's values and fresh ones; 1 otherwise.
  int variants() const { return variants_; }
  // Which values call `call` gets. A set's buffers change values from one pass over the sets to
  // the next, so a result kept by pointer, id or version of a buffer is wrong on its next use.
  int VariantOf(int64_t call) const {
    const int64_t sets = static_cast<int64_t>(sets_.size());
    return static_cast<int>((call % sets + call / sets) % variants_);
  }
  const pybind11::tuple& Arguments(int64_t call) const { return sets_[SetOf(call)]; }
  size_t tensors() const { return tensors_.size(); }
  // Probing needs the caller's values kept aside: without them the calls use the caller's own
  // tensors, unchecked.
  bool can_probe() const { return (copied_ || in_place_) && !tensors_.empty(); }
  bool in_place() const { return in_place_; }
  const std::optional<std::vector<int>>& declared_outputs() const { return declared_outputs_; }
  // True when [data, data + bytes) overlaps one of our copies or a caller's tensor.
  bool Overlaps(const void* data, size_t bytes) const;

  // -- Probing, on set 0 (checked_calls.h). All synchronous. --
  // Set 0 back to the caller's values.
  Status ResetFirstSet();
  // Set `set` as a call of it would find it (its values, outputs poisoned or restored).
  Status PrepareSet(int set);
  // Per tensor argument: does set 0 differ from the caller's values (bit for bit)?
  StatusOr<std::vector<bool>> FirstSetChanged();
  // Did the last call write the caller's own tensors, which it was not given? Then the
  // arguments go in place (its tensors are given back their values): returns true.
  StatusOr<bool> MoveInPlaceIfCallerWritten();
  // The calls run on the caller's tensors from now on (`why` goes into the notes).
  Status MoveInPlace(const std::string& why);
  bool copied() const { return copied_; }
  Status ZeroInFirstSet(size_t tensor);
  // Does tensor `tensor` of set 0 (after a call from zeros: did the call write anything), or
  // the caller's tensor, hold a byte other than 0?
  StatusOr<bool> FirstSetNonZero(size_t tensor);
  StatusOr<bool> CallerNonZero(size_t tensor);
  // Does tensor `tensor` of set 0 equal `expected` (a device buffer of its size) bit for bit?
  StatusOr<bool> FirstSetEquals(size_t tensor, const void* expected);
  // A copy of tensor `tensor` of set `set`.
  StatusOr<std::shared_ptr<DeviceBuffer>> CopyOfSet(size_t tensor, int set = 0);
  const void* CallerData(size_t tensor) const;
  // `writers`: which functions write it (a paired benchmark's candidate may return its result
  // where the reference writes an argument); an output is checked for those only.
  void SetMode(size_t tensor, OutputMode mode, std::string found_by, std::vector<bool> writers);
  OutputMode Mode(size_t tensor) const { return tensors_[tensor].mode; }
  // Outputs as cfg `outputs` declares them (kPoisoned), or nothing for lack of a declaration.
  void ApplyDeclaredOutputs();
  // Function `fn`'s reference for `variant`: its outputs in the variant's first set now (after
  // a call), or `given` for an output whose reference was taken earlier (the probe's copy).
  Status TakeReference(int fn, int variant,
                       const std::vector<std::shared_ptr<DeviceBuffer>>& given = {});
  bool has_outputs() const;
  // Whether some output function `fn` writes differs between the two variants' references;
  // nullopt when nothing says (one variant, no input varied, no checked output).
  StatusOr<std::optional<bool>> OutputsFollowInputs(int fn) const;
  bool any_varied() const;
  // Every set gets the caller's values again (the function raised on the fresh ones); `why`
  // goes into the notes. One variant from now on.
  Status DropVariants(const std::string& why);
  // Bytes of fn's checked outputs its reference call changed (from poison, or from the
  // caller's values), and bytes they hold in all; known after the first checked call.
  uint64_t bytes_changed(int fn) const { return bytes_changed_.empty() ? 0 : bytes_changed_[fn]; }
  uint64_t output_bytes(int fn) const;
  // Outputs declared unverifiable, one sentence each.
  std::vector<std::string> DeclaredUnverifiable() const;

  // -- Timing on values never seen (unseen_values.h). Synchronous. --
  // Whether set 1 can be given values the function never saw: two variants, on our copies.
  bool can_vary_anew() const { return variants_ == 2 && copied_ && !in_place_ && sets() >= 2; }
  // Set 1 as a call of it finds it (the fresh variant the probes showed the function), its
  // varied inputs then rewritten as the caller's reversed and scaled by `scale` when given.
  Status PrepareVariedSet(std::optional<float> scale);
  // After a call on new values: whether every varied input of set 1 differs from the caller's
  // values (a constant or symmetric input stays the same reversed), and whether fn's checked
  // outputs in set 1 equal its reference on the caller's values, bit for bit (nullopt: no
  // checked output argument).
  StatusOr<bool> VariedSetIsNew() const;
  StatusOr<std::optional<bool>> VariedSetAnsweredAsCaller(int fn) const;

  // -- Around the calls, stream-ordered (CallHooks, through checked_calls.h). --
  // Poisons or restores the outputs of the set `call` uses (and loads its values, in place).
  Status BeforeCall(int64_t call);
  // After `fn`'s first checked call, drained: the spread against the reference chooses each
  // output's tolerance, and the call itself is checked with it.
  Status AfterFirstCall(int fn, int64_t call);
  // After a first checked call: whether a 16-bit float output's spread wants another call.
  bool WantsSpreadCall(int fn) const;
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
    std::unique_ptr<ExportedTensor> original;           // the caller's tensor
    std::shared_ptr<DeviceBuffer> pristine;             // the caller's values, kept aside
    std::shared_ptr<DeviceBuffer> variant;              // fresh values; null: not varied
    std::vector<std::shared_ptr<DeviceBuffer>> copies;  // one per set, when copied_
    // Per function and variant, outputs only.
    std::vector<std::array<std::shared_ptr<DeviceBuffer>, 2>> reference;
    std::vector<ToleranceChoice> tolerance;  // per function, outputs only
    std::vector<ReferenceSpread> spread;     // per function: the widest of its first calls
    std::vector<bool> writers;               // per function
    size_t bytes() const { return original->span_bytes(); }
    bool output() const { return mode == OutputMode::kRestored || mode == OutputMode::kPoisoned; }
    bool checked_for(int fn) const { return output() && writers[fn]; }
  };

  ArgumentRotation() = default;
  int SetOf(int64_t call) const {
    return static_cast<int>(call % static_cast<int64_t>(sets_.size()));
  }
  // Where set `set`'s tensor is: our copy, or the caller's own tensor (in place, or too large).
  void* DataOf(const Argument& a, int set) const;
  // The caller's values: kept aside, or the caller's tensor itself when too large to keep.
  const void* Caller(const Argument& a) const;
  // The values of an input under `variant`: the caller's, or the fresh ones.
  const void* ValuesOf(const Argument& a, int variant) const;
  // Writes `variant`'s values into set `set`'s inputs (in place: into the caller's tensors).
  Status LoadValues(int set, int variant);
  Status CheckFirstCall(int fn, int set, int variant);
  // The calls run on the caller's tensors from now on; the copies are let go.
  void UseInPlace();

  pybind11::tuple caller_args_;
  std::vector<pybind11::tuple> sets_;
  bool copied_ = true;     // sets are our copies
  bool in_place_ = false;  // the calls use the caller's tensors, loaded before each call
  int variants_ = 1;
  std::vector<int> loaded_;  // per set: the variant its inputs hold
  // The variant set `set`'s inputs hold; in place every set is the caller's one tensor.
  int& Loaded(int set) { return loaded_[in_place_ ? 0 : set]; }
  std::optional<std::vector<int>> declared_outputs_;
  std::optional<OutputTolerance> declared_tolerance_;
  std::vector<Argument> tensors_;  // rotated tensor arguments, in argument order
  std::vector<int> not_rotated_;   // tensor-like arguments we could not copy
  std::vector<std::string> notes_;
  int functions_ = 1;
  DeviceCounters counters_;        // [fn][slot] mismatch counts of the timed calls
  DeviceCounters inputs_changed_;  // bytes of inputs found changed before a reload
  int64_t timed_calls_ = 0;
  std::vector<int> first_calls_;  // per function
  std::vector<uint64_t> bytes_changed_;
  std::vector<std::string> first_call_failures_;
  std::vector<std::string> first_call_flags_;
};

}  // namespace kc::native
