// ArgumentRotation: fresh inputs and checked outputs for every call of a benchmark
// (docs/benchmark-integrity.md "Fresh inputs, checked outputs").
//
// The call's torch.Tensor arguments get `sets` independent copies (device buffers of our own);
// call k uses set k % sets, and the caller's tensors are never passed, so nothing the checks
// write reaches them. Outputs (SettleOutputs) are reset before every call: to poison
// (kPoisonByte), or, for those a probe call saw change, to the caller's values (they may be read
// in place); either way a call that skips its work leaves something other than its result; the first checked call's outputs become the
// reference, and every timed call's outputs are compared with it on the device. Inputs must come
// out of the benchmark as they went in. At the end the caller's outputs get the reference, as if
// the calls had run on them. Defeats result caching (keyed on values or on data_ptr), replay,
// and storage swaps: we hold every buffer ourselves, so y.set_() redirects only the Python
// object.
//
// Usage:
//   KC_ASSIGN_OR_RETURN(auto rotation, ArgumentRotation::Create(args, plan, 2));
//   timer.Run(options, [&](int fn, int64_t k) { return Call(fn, rotation->Arguments(k)); },
//             *rotation);
//   KC_ASSIGN_OR_RETURN(RotationFindings findings, rotation->Finish());
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include "base/status.h"
#include "native/cupti_timer.h"
#include "native/dlpack_tensor.h"
#include "native/output_check.h"

namespace kc::native {

struct RotationPlan {
  bool rotate = true;                       // cfg "rotate_inputs"
  std::optional<std::vector<int>> outputs;  // cfg "outputs": argument indices (SettleOutputs)
  int64_t max_copy_bytes = int64_t{4} << 30;
  size_t target_bytes = 0;  // rotate through at least this much memory (2 x L2)
  int max_sets = 8;
};

struct RotationFindings {
  std::vector<std::string> failures;  // the benchmark fails (kind `correctness`)
  std::vector<std::string> flags;     // reported; the result is not trusted
  // For paired runs: elements where function 1's first output differs from function 0's.
  std::optional<uint64_t> cross_mismatches;
};

class ArgumentRotation final : public CallHooks {
 public:
  // `functions`: how many callables share the arguments (1, or 2 for a paired benchmark).
  static StatusOr<std::unique_ptr<ArgumentRotation>> Create(const pybind11::tuple& args,
                                                            const RotationPlan& plan,
                                                            int functions);

  ~ArgumentRotation() override;

  // Decides which arguments are outputs, before any other call: cfg `outputs` when given, else
  // those that one call on the first set (`call_on_first_set`) changes, else the last tensor
  // argument of a call with two or more. The first set is restored afterwards.
  Status SettleOutputs(const std::function<Status()>& call_on_first_set);

  int sets() const { return static_cast<int>(sets_.size()); }
  const pybind11::tuple& Arguments(int64_t call) const { return sets_[SetOf(call)]; }

  // CallHooks, all stream-ordered:
  // poisons the outputs of the set `call` uses;
  Status BeforeCall(int fn, int64_t call) override;
  // records function `fn`'s outputs after its first (checked) call as its reference;
  Status AfterFirstCall(int fn, int64_t call) override;
  // sizes the counters: one per timed call of each function;
  Status BeginTimed(int64_t timed_calls) override;
  // enqueues the comparison of `call`'s outputs with `fn`'s reference into counter `slot`.
  Status AfterTimedCall(int fn, int64_t call, int64_t slot) override;
  // Reads the counters and checks the inputs; the device must be idle.
  StatusOr<RotationFindings> Finish();

  nlohmann::json Describe() const;

 private:
  struct Argument {
    int index = 0;
    bool output = false;
    bool restore = false;  // output: restored before each call instead of poisoned
    std::unique_ptr<ExportedTensor> original;  // the caller's tensor
    std::vector<std::shared_ptr<DeviceBuffer>> copies;  // one per set, when copied_
    std::vector<std::shared_ptr<DeviceBuffer>> reference;  // per function, outputs only
  };

  ArgumentRotation() = default;
  int SetOf(int64_t call) const {
    return static_cast<int>(call % static_cast<int64_t>(sets_.size()));
  }
  void* DataOf(const Argument& a, int set) const;

  std::vector<pybind11::tuple> sets_;
  bool copied_ = true;  // false: the copies exceed the budget, and the calls use the caller's
  std::optional<std::vector<int>> declared_outputs_;
  std::string outputs_source_ = "none";
  std::vector<Argument> tensors_;  // rotated tensor arguments, in argument order
  std::vector<int> not_rotated_;   // tensor-like arguments we could not copy
  std::vector<std::string> notes_;
  int functions_ = 1;
  unsigned long long* counters_ = nullptr;  // device: [fn][slot] mismatch counts
  int64_t timed_calls_ = 0;
  std::vector<int64_t> unwritten_;  // per function: bytes of the reference still poisoned
};

}  // namespace kc::native
