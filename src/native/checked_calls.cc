#include "native/checked_calls.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "native/cuda_status.h"

namespace kc::native {
namespace {

Status Synchronize() {
  KC_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return Status::Ok();
}

std::string FoundBy(OutputMode mode, bool changed_by_reference) {
  if (mode == OutputMode::kPoisoned) {
    return changed_by_reference
               ? "written by the reference call, the same from zeros (poisoned before each call)"
               : "written by a call from zeros; the caller's values already held its result "
                 "(poisoned before each call)";
  }
  return changed_by_reference
             ? "changed by the reference call and also read (restored to the caller's values "
               "before each call)"
             : "written by a call from zeros with another result: read and written (restored "
               "to the caller's values before each call)";
}

}  // namespace

StatusOr<std::unique_ptr<CheckedCalls>> CheckedCalls::Create(const pybind11::tuple& args,
                                                             const RotationPlan& plan,
                                                             ReturnDeclarations returns,
                                                             int functions) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<ArgumentRotation> arguments,
                      ArgumentRotation::Create(args, plan, functions));
  return std::unique_ptr<CheckedCalls>(
      new CheckedCalls(std::move(arguments), std::move(returns), functions));
}

// What the probes saw of one tensor argument under one function.
struct CheckedCalls::Observation {
  bool changed = false;  // by the reference call, from the caller's values
  bool written = false;  // over zeros, by a call from zeros
  bool same_from_zeros = false;
  std::shared_ptr<DeviceBuffer> result;  // the reference call's, when changed
};

StatusOr<std::vector<CheckedCalls::Observation>> CheckedCalls::Observe(const ProbeCalls& probes,
                                                                       int fn) {
  ArgumentRotation& a = *arguments_;
  std::vector<Observation> seen(a.tensors());
  KC_RETURN_IF_ERROR(a.ResetFirstSet());
  KC_RETURN_IF_ERROR(probes.call(fn, 0));
  KC_RETURN_IF_ERROR(Synchronize());
  KC_ASSIGN_OR_RETURN(const bool moved, a.MoveInPlaceIfCallerWritten());
  if (moved) {  // the call writes what it was captured on: once more, in place
    returned_.Drop();
    KC_RETURN_IF_ERROR(a.ResetFirstSet());
    KC_RETURN_IF_ERROR(probes.call(fn, 0));
    KC_RETURN_IF_ERROR(Synchronize());
  }
  KC_RETURN_IF_ERROR(returned_.TakeReference(fn));
  KC_ASSIGN_OR_RETURN(std::vector<bool> changed, a.FirstSetChanged());
  for (size_t t = 0; t < a.tensors(); ++t) {
    seen[t].changed = changed[t];
    if (changed[t]) {
      KC_ASSIGN_OR_RETURN(seen[t].result, a.CopyOfSet(t));
    }
  }
  for (size_t t = 0; t < a.tensors(); ++t) {
    KC_RETURN_IF_ERROR(a.ResetFirstSet());
    KC_RETURN_IF_ERROR(a.ZeroInFirstSet(t));
    KC_ASSIGN_OR_RETURN(bool completed, probes.try_call(fn, 0));
    returned_.Drop();
    if (completed) {
      KC_ASSIGN_OR_RETURN(seen[t].written, a.FirstSetNonZero(t));
    }
    if (seen[t].written) {
      const void* expected = changed[t] ? seen[t].result->data() : a.CallerData(t);
      KC_ASSIGN_OR_RETURN(seen[t].same_from_zeros, a.FirstSetEquals(t, expected));
    }
  }
  return seen;
}

Status CheckedCalls::DiscoverArguments(const ProbeCalls& probes) {
  ArgumentRotation& a = *arguments_;
  std::vector<std::vector<Observation>> seen(functions_);
  for (int fn = 0; fn < functions_; ++fn) {
    KC_ASSIGN_OR_RETURN(seen[fn], Observe(probes, fn));
  }
  // A call that wrote none of the copies it was given and returned nothing to check may write
  // the caller's tensors themselves (a CUDA graph captured on them, writing what they already
  // held): once more, in place, where the probes' zeros reach what it reads.
  if (a.copied() && NothingFound(seen)) {
    KC_RETURN_IF_ERROR(a.MoveInPlace("the call wrote none of the copies it was given"));
    for (int fn = 0; fn < functions_; ++fn) {
      KC_ASSIGN_OR_RETURN(seen[fn], Observe(probes, fn));
    }
  }
  for (size_t t = 0; t < a.tensors(); ++t) {
    std::vector<bool> writers(functions_);
    bool restored = false;
    bool changed = false;
    for (int fn = 0; fn < functions_; ++fn) {
      const Observation& o = seen[fn][t];
      writers[fn] = o.changed || o.written;
      changed = changed || o.changed;
      // Write-only when a call from zeros gives what a call from the caller's values gave;
      // that says nothing when the caller's values are zeros too (an accumulation into zeros).
      bool write_only = o.written && o.same_from_zeros;
      if (write_only) {
        KC_ASSIGN_OR_RETURN(write_only, a.CallerNonZero(t));
      }
      restored = restored || (writers[fn] && !write_only);
    }
    if (std::find(writers.begin(), writers.end(), true) == writers.end()) continue;
    const OutputMode mode = restored ? OutputMode::kRestored : OutputMode::kPoisoned;
    a.SetMode(t, mode, FoundBy(mode, changed), std::move(writers));
  }
  // The reference of a restored output is the reference call's result (a call that computes
  // once and then skips shows from the first checked call on); one the reference call left
  // unchanged has the caller's values. A poisoned output's reference is a call from poison,
  // so that what no call writes (an output written in part) is poison on both sides.
  for (int fn = 0; fn < functions_; ++fn) {
    std::vector<std::shared_ptr<DeviceBuffer>> reference(a.tensors());
    for (size_t t = 0; t < a.tensors(); ++t) {
      if (a.Mode(t) != OutputMode::kRestored) continue;
      reference[t] = seen[fn][t].result;
      if (reference[t] == nullptr) {
        KC_RETURN_IF_ERROR(a.ResetFirstSet());
        KC_ASSIGN_OR_RETURN(reference[t], a.CopyOfSet(t));
      }
    }
    KC_RETURN_IF_ERROR(PreparedCall(probes, fn));
    returned_.Drop();  // the returned reference is the reference call's
    KC_RETURN_IF_ERROR(a.TakeReference(fn, 0, reference));
  }
  return Status::Ok();
}

bool CheckedCalls::NothingFound(const std::vector<std::vector<Observation>>& seen) const {
  for (int fn = 0; fn < functions_; ++fn) {
    if (returned_.checked(fn) > 0) return false;
    for (const Observation& o : seen[fn]) {
      if (o.changed || o.written) return false;
    }
  }
  return true;
}

Status CheckedCalls::PreparedCall(const ProbeCalls& probes, int fn, int set) {
  KC_RETURN_IF_ERROR(arguments_->PrepareSet(set));
  KC_RETURN_IF_ERROR(Synchronize());
  KC_RETURN_IF_ERROR(probes.call(fn, set));
  return Synchronize();
}

Status CheckedCalls::FindReusedReturns(const ProbeCalls& probes, int fn) {
  if (returned_.checked(fn) == 0) return returned_.SettleReused(fn, false);
  KC_RETURN_IF_ERROR(PreparedCall(probes, fn));
  KC_ASSIGN_OR_RETURN(bool reused, returned_.FindReused(fn));
  bool completed = false;
  if (reused) {
    KC_RETURN_IF_ERROR(arguments_->PrepareSet(0));
    KC_ASSIGN_OR_RETURN(completed, probes.try_call(fn, 0));
  }
  return returned_.SettleReused(fn, completed);
}

Status CheckedCalls::TakeVariantReferences(const ProbeCalls& probes, int fn) {
  if (arguments_->variants() < 2) return Status::Ok();
  KC_RETURN_IF_ERROR(arguments_->PrepareSet(1));
  KC_ASSIGN_OR_RETURN(const bool completed, probes.try_call(fn, 1));
  KC_RETURN_IF_ERROR(Synchronize());
  std::optional<std::string> different;
  if (completed) {
    KC_ASSIGN_OR_RETURN(different, returned_.TakeVariantReference(fn));
  }
  if (!completed || different) {  // the caller's values alone from now on, said so
    returned_.Drop();
    variants_dropped_ =
        !completed ? "raised on the fresh input values" : "on the fresh input values " + *different;
    return arguments_->DropVariants("the function " + variants_dropped_);
  }
  KC_RETURN_IF_ERROR(arguments_->TakeReference(fn, 1));
  KC_ASSIGN_OR_RETURN(std::optional<bool> arguments, arguments_->OutputsFollowInputs(fn));
  KC_ASSIGN_OR_RETURN(std::optional<bool> returned, returned_.OutputsFollowInputs(fn));
  if (arguments || returned)
    follows_inputs_[fn] = arguments.value_or(false) || returned.value_or(false);
  return Status::Ok();
}

Status CheckedCalls::Settle(const ProbeCalls& probes) {
  if (arguments_->can_probe() && !arguments_->declared_outputs()) {
    KC_RETURN_IF_ERROR(DiscoverArguments(probes));
  } else {
    arguments_->ApplyDeclaredOutputs();
    KC_RETURN_IF_ERROR(TakeReferences(probes));
  }
  for (int fn = 0; fn < functions_; ++fn) {
    KC_RETURN_IF_ERROR(FindReusedReturns(probes, fn));
    KC_RETURN_IF_ERROR(TakeVariantReferences(probes, fn));
  }
  return arguments_->ResetFirstSet();
}

Status CheckedCalls::TakeReferences(const ProbeCalls& probes) {
  for (int fn = 0; fn < functions_; ++fn) {
    KC_RETURN_IF_ERROR(PreparedCall(probes, fn));
    KC_RETURN_IF_ERROR(arguments_->TakeReference(fn, 0));
    KC_RETURN_IF_ERROR(returned_.TakeReference(fn));
  }
  return Status::Ok();
}

Status CheckedCalls::BeforeCall(int /*fn*/, int64_t call) {
  KC_RETURN_IF_ERROR(returned_.BeforeCall());
  return arguments_->BeforeCall(call);
}

Status CheckedCalls::AfterFirstCall(int fn, int64_t call) {
  KC_RETURN_IF_ERROR(arguments_->AfterFirstCall(fn, call));
  return returned_.AfterFirstCall(fn, arguments_->VariantOf(call));
}

bool CheckedCalls::WantsSpreadCall(int fn) {
  return arguments_->WantsSpreadCall(fn) || returned_.WantsSpreadCall(fn);
}

Status CheckedCalls::BeginTimed(int64_t timed_calls) {
  KC_RETURN_IF_ERROR(arguments_->BeginTimed(timed_calls));
  return returned_.BeginTimed(timed_calls);
}

Status CheckedCalls::AfterTimedCall(int fn, int64_t call, int64_t slot) {
  KC_RETURN_IF_ERROR(arguments_->AfterTimedCall(fn, call, slot));
  return returned_.AfterTimedCall(fn, slot, arguments_->VariantOf(call));
}

StatusOr<CheckFindings> CheckedCalls::Finish(int64_t graph_activities) {
  CheckFindings findings;
  if (functions_ == 2) KC_RETURN_IF_ERROR(CrossCheck());
  KC_RETURN_IF_ERROR(arguments_->Finish(findings));
  KC_RETURN_IF_ERROR(returned_.Finish(findings));
  const std::vector<std::string> declared = arguments_->DeclaredUnverifiable();
  for (const std::string& sentence : declared)
    findings.unchecked.push_back(sentence);
  const bool declared_unverifiable = !declared.empty() || returned_.declares_unverifiable();
  const bool any_checked = arguments_->has_outputs() || returned_.checked(0) > 0;
  if (!any_checked && returned_.constants(0) > 0) {
    findings.flags.push_back(
        "the call's only outputs are tensors it returns without writing them (the same storage "
        "on every call, left as it was when zeroed before a call): a cached result, not a "
        "computation");
  } else if (!any_checked && declared_unverifiable) {
    // Whatever the call outputs was declared random by design: said above, nothing to add.
  } else if (!any_checked) {
    findings.unchecked.push_back(
        arguments_->tensors() > 0 && !arguments_->can_probe()
            ? "the arguments are too large to keep their values aside, so no probe could find "
              "the outputs: declare them with cfg 'outputs', or return them"
            : "no output found: the call returned no CUDA tensor and wrote none of its tensor "
              "arguments; whatever it writes (its own buffers, a captured CUDA graph's, a "
              "closure's) is timed but not checked");
  } else if (!variants_dropped_.empty()) {
    findings.unchecked.push_back(
        "the outputs were checked on the caller's values only: the function " + variants_dropped_ +
        ", so a result kept by pointer or shape cannot be told from a computation");
  } else if (follows_inputs_[0] == false) {
    findings.unchecked.push_back(
        "the call's checked outputs are the same for two sets of input values (the caller's, "
        "and fresh ones: reversed and scaled by 3/4), so they do not follow its inputs: a "
        "cached answer (a replayed graph's copy, a result kept by pointer or shape) cannot be "
        "told from a computation");
  } else if (graph_activities > 0 && !follows_inputs_[0]) {
    findings.unchecked.push_back(
        "the call replays a CUDA graph (integrity.graph_activities), and no input could be given "
        "fresh values (no floating-point tensor argument, or cfg rotate_inputs false), so a "
        "graph that replays a copy of a precomputed result cannot be told from one that "
        "computes it");
  }
  return findings;
}

uint64_t CheckedCalls::BytesChanged(int fn) const {
  return arguments_->bytes_changed(fn) + returned_.checked_bytes(fn);
}

StatusOr<bool> CheckedCalls::AnsweredNewValuesAsCaller(int fn) {
  KC_ASSIGN_OR_RETURN(std::optional<bool> returned, returned_.HeldAnsweredAsCaller(fn));
  if (follows_inputs_[fn] != true || CheckedBytes(fn) <= kMaxUndeclaredConstantBytes) return false;
  KC_ASSIGN_OR_RETURN(bool values_new, arguments_->VariedSetIsNew());
  if (!values_new) return false;
  KC_ASSIGN_OR_RETURN(std::optional<bool> arguments, arguments_->VariedSetAnsweredAsCaller(fn));
  if (!returned && !arguments) return false;
  return returned.value_or(true) && arguments.value_or(true);
}

uint64_t CheckedCalls::CheckedBytes(int fn) const {
  return arguments_->output_bytes(fn) + returned_.checked_bytes(fn);
}

// A paired benchmark's two functions' first outputs (a returned tensor, else an output
// argument) agree as builtins.assert_close's defaults require.
Status CheckedCalls::CrossCheck() {
  ElementType types[2];
  const DeviceBuffer* first[2] = {nullptr, nullptr};
  for (int fn = 0; fn < 2; ++fn) {
    first[fn] = returned_.FirstReference(fn, &types[fn]);
    if (first[fn] == nullptr) first[fn] = arguments_->FirstReference(fn, &types[fn]);
  }
  if (first[0] == nullptr || first[1] == nullptr) return Status::Ok();
  if (first[0]->bytes() != first[1]->bytes() || types[0].code != types[1].code ||
      types[0].bits != types[1].bits) {
    cross_mismatches_ = std::max(first[0]->bytes(), first[1]->bytes());
    return Status::Ok();
  }
  constexpr OutputTolerance kCrossCheck{1e-2f, 1e-3f};
  KC_ASSIGN_OR_RETURN(DeviceCounters count, DeviceCounters::Create<unsigned long long>(1));
  KC_RETURN_IF_ERROR(EnqueueCountMismatches(first[1]->data(), first[0]->data(), first[0]->bytes(),
                                            types[0], kCrossCheck, count.at<unsigned long long>(0),
                                            nullptr));
  KC_ASSIGN_OR_RETURN(std::vector<unsigned long long> counts, count.Read<unsigned long long>());
  cross_mismatches_ = counts[0];
  return Status::Ok();
}

nlohmann::json CheckedCalls::DescribeOutputCheck() const {
  std::optional<ToleranceChoice> choice = arguments_->FirstTolerance();
  if (!choice) choice = returned_.FirstTolerance();
  if (!choice) {
    choice = ToleranceChoice{};
    choice->source = "default";
  }
  return ToJson(*choice);
}

}  // namespace kc::native
