// CheckedCalls: everything that runs around a benchmark's calls to check them (the timer's
// CallHooks): the argument rotation (argument_rotation.h) and the returned tensors
// (returned_outputs.h), and the probes that decide, from evidence, which of them are outputs.
//
// The probes, before any other call, on copies of the caller's arguments (never on the caller's
// own tensors, and never with an input poisoned):
//   1. the reference call, from the caller's values: the arguments it changes, and the tensors
//      it returns, are outputs; their values are the reference;
//   2. for each tensor argument, one call with that argument zeroed: an argument the call
//      writes over zeros is an output, whatever its position (destination first, middle or
//      last; the seed's `add_one(x, y)`, whose y already held the answer, included). If the
//      call from zeros gives the reference (and the caller's values were not zeros already),
//      the output is write-only and is poisoned before every later call; otherwise it may
//      also be read (`out.index_add_(...)` into zeros), and is restored to the caller's values;
//   3. when the function returns tensors: a second call, to find returned storage that comes
//      back again (a graph's static output, a cache, a constant), and for such storage a third
//      call from zeros, to see whether the call writes it;
//   4. with two value variants (argument_rotation.h), a call on the fresh values: its outputs
//      are that variant's reference. Outputs that come out the same for both do not follow the
//      inputs: a cached answer cannot be told from a computation, and they count as unchecked.
// A reference call that writes the caller's own tensors rather than the ones it is given (a
// CUDA graph captured on them) moves the arguments in place, and the probes start again.
// A zero can still surprise user code (an index of 0, a length of 0) but, unlike poison, it is a
// valid value of every dtype; a probe call from zeros that raises decides nothing.
//
// Usage:
//   KC_ASSIGN_OR_RETURN(auto checked, CheckedCalls::Create(args, plan, functions));
//   KC_RETURN_IF_ERROR(checked->Settle(probes));
//   timer.Run(options, call, *checked);   // call: checked->Hold(fn, fn(*checked->Arguments(k)))
//   KC_ASSIGN_OR_RETURN(CheckFindings findings, checked->Finish(graph_activities));
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include "base/status.h"
#include "native/argument_rotation.h"
#include "native/cupti_timer.h"
#include "native/returned_outputs.h"

namespace kc::native {

// Calls of function `fn` on an argument set (try_call: set 0), their return value held
// (CheckedCalls::Hold).
struct ProbeCalls {
  std::function<Status(int fn, int set)> call;              // an exception ends the benchmark
  std::function<StatusOr<bool>(int fn, int set)> try_call;  // false: it raised (forgotten)
};

class CheckedCalls final : public CallHooks {
 public:
  static StatusOr<std::unique_ptr<CheckedCalls>> Create(const pybind11::tuple& args,
                                                        const RotationPlan& plan,
                                                        ReturnDeclarations returns, int functions);

  const pybind11::tuple& Arguments(int64_t call) const { return arguments_->Arguments(call); }
  void Hold(int fn, pybind11::object value) { returned_.Hold(fn, std::move(value)); }

  // The probes above, then each function's reference call. Set 0 ends as the caller's values.
  Status Settle(const ProbeCalls& probes);

  Status BeforeCall(int fn, int64_t call) override;
  Status AfterFirstCall(int fn, int64_t call) override;
  bool WantsSpreadCall(int fn) override;
  Status BeginTimed(int64_t timed_calls) override;
  Status AfterTimedCall(int fn, int64_t call, int64_t slot) override;

  // The device must be idle. `graph_activities`: timed device activities launched by a CUDA
  // graph (checked when its outputs follow the input variants).
  StatusOr<CheckFindings> Finish(int64_t graph_activities);
  // Bytes of fn's checked outputs: those its reference call changed (the floor's numerator)
  // and those they hold in all.
  uint64_t BytesChanged(int fn) const;
  uint64_t CheckedBytes(int fn) const;
  // Elements where function 1's first output differs from function 0's (paired benchmarks;
  // every element when their shapes differ).
  uint64_t cross_mismatches() const { return cross_mismatches_; }

  // Timing on values never seen (unseen_values.h): whether set 1 can be given new values, and
  // set 1 readied with the fresh variant the probes showed (nullopt) or with new ones.
  bool CanVaryAnew() const { return arguments_->can_vary_anew(); }
  Status PrepareVariedSet(std::optional<float> scale) {
    return arguments_->PrepareVariedSet(scale);
  }
  // After a drained call of `fn` on set 1 readied with new values, its value held: true when it
  // answered with its answer to the caller's values, bit for bit, though every varied input was
  // new and its outputs follow its inputs, over more than a small constant's bytes.
  StatusOr<bool> AnsweredNewValuesAsCaller(int fn);

  // defences.arguments, defences.returned and defences.output_check.
  nlohmann::json DescribeArguments() const { return arguments_->Describe(); }
  nlohmann::json DescribeReturned() const { return returned_.Describe(); }
  nlohmann::json DescribeOutputCheck() const;

 private:
  explicit CheckedCalls(std::unique_ptr<ArgumentRotation> arguments, ReturnDeclarations returns,
                        int functions)
      : arguments_(std::move(arguments)),
        returned_(functions, *arguments_, std::move(returns)),
        functions_(functions),
        follows_inputs_(functions) {}

  struct Observation;
  // Steps 1 and 2 under one function.
  StatusOr<std::vector<Observation>> Observe(const ProbeCalls& probes, int fn);
  // Steps 1 and 2 under each function; an argument any of them writes is an output, checked
  // for the functions that write it. Takes every function's reference.
  Status DiscoverArguments(const ProbeCalls& probes);
  // No function wrote an argument or returned a tensor to check.
  bool NothingFound(const std::vector<std::vector<Observation>>& seen) const;
  // Each function's reference call, outputs as declared (or none to find).
  Status TakeReferences(const ProbeCalls& probes);
  Status CrossCheck();
  // One call of `fn` from set `set` prepared as the timed calls will be.
  Status PreparedCall(const ProbeCalls& probes, int fn, int set = 0);
  // Step 3.
  Status FindReusedReturns(const ProbeCalls& probes, int fn);
  // Step 4.
  Status TakeVariantReferences(const ProbeCalls& probes, int fn);

  std::unique_ptr<ArgumentRotation> arguments_;
  ReturnedOutputs returned_;
  int functions_;
  // Per function: whether some checked output differs between the variants (nullopt: no
  // variant, or nothing to compare).
  std::vector<std::optional<bool>> follows_inputs_;
  // Why the fresh input values were given up (the function raised on them, or returned another
  // structure); empty while they stand.
  std::string variants_dropped_;
  uint64_t cross_mismatches_ = 0;
};

}  // namespace kc::native
