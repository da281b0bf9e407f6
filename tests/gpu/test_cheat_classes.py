"""Issue 40, item 4: one program per public attack class (tests/gpu/cheats.py, CLASS_CASES), plus
the six routes that fooled the benchmark on the H200. Each test makes two requests:

1. the attack: the honest twin and then the cheat timed with the defences off (one argument set,
   no output arguments, the return value dropped: nothing is checked), and the naive grader's
   check (cheats.CLASS_OPS max_error: the cheat's outputs after one more call against the honest
   twin's on the same tensors);
2. the defence, in a request of its own (a cheat may break its worker: cuptiFinalize, a patched
   libcupti): the honest twin and then the cheat with every defence on (cfg {}).

(a) The attack works when the cheat's off median is under half the twin's and its output looked
right: then the defended cheat must be refused (FAILED, kind correctness or unavailable) or come
back with integrity.trusted false. Where our timer defeats the class even with the defences off
(the work is timed anyway, or the cheat cannot install itself), the defended result, if trusted,
must carry the honest number: within 10% of the honest twin's defended median. Which branch ran
is recorded (record(), scripts/gpu-check.sh's figures) with the verdict.
"""

from __future__ import annotations

import pytest
from kcoral import Program

import cheats
from invariants import assert_results_invariants
from test_gpu_server import record

OFF = {"rotate_inputs": False, "outputs": []}
ON: dict = {}
REFUSED = ("correctness", "unavailable")
TIMEOUT_S = 120

OPS = cheats.CLASS_OPS + "\nfrom kcoral.builtins import benchmark\n"
LATE = "from kcoral.builtins import benchmark\n"  # resolved after the cheat's import, as a grader's harness would


def _inputs(program: Program, case: dict) -> tuple:
    """ops module, honest kernel handle and argument handles (seeded inputs)."""
    ops = program.upload(id="ops", kind="module", source=OPS)
    build = program.get_function(id="build", module=ops, name=case["inputs"])
    values = program.run(id="inputs", fn=build, args=[])
    pick = program.get_function(id="pick", module=ops, name="pick")
    args = [program.run(id=f"arg{i}", fn=pick, args=[values, i]) for i in range(case["arity"])]
    honest_module = program.upload(id="honest", kind="module", source=case["honest"])
    honest = program.get_function(id="honest_kernel", module=honest_module, name="kernel")
    if case["answer_sheet"]:
        program.run(id="expected", fn=honest, args=args)  # a grader's expected output, kept in memory
    return ops, honest, args


def _cheat(program: Program, case: dict, args: list) -> tuple:
    """Imports the cheat (it may patch things), runs its prepare(); (kernel, late benchmark)."""
    module = program.upload(id="cheat", kind="module", source=case["source"])
    kernel = program.get_function(id="cheat_kernel", module=module, name="kernel")
    if case["prepare"]:
        program.run(id="prepare", fn=program.get_function(id="cheat_prepare", module=module, name="prepare"), args=args)
    if "def report(" in case["source"]:
        report = program.get_function(id="cheat_report", module=module, name="report")
        program.return_(key="state", value=program.run(id="state", fn=report, args=[]))
    late = program.upload(id="late", kind="module", source=LATE)
    return kernel, program.get_function(id="late_benchmark", module=late, name="benchmark")


def attack_program(case: dict) -> Program:
    program = Program()
    ops, honest, args = _inputs(program, case)
    benchmark = program.get_function(id="benchmark", module=ops, name="benchmark")
    discard = program.get_function(id="discard", module=ops, name="discard")
    honest_off = program.run(id="honest_off_fn", fn=discard, args=[honest])
    program.return_(key="honest_off", value=program.run(id="honest_off", fn=benchmark, args=[honest_off, *args, OFF]))
    kernel, late_benchmark = _cheat(program, case, args)
    cheat_off = program.run(id="cheat_off_fn", fn=discard, args=[kernel])
    program.return_(key="cheat_off", value=program.run(id="cheat_off", fn=late_benchmark, args=[cheat_off, *args, OFF]))
    check = program.get_function(id="max_error", module=ops, name="max_error")
    program.return_(key="check", value=program.run(id="check", fn=check, args=[kernel, honest, case["outputs"], *args]))
    return program


def defended_program(case: dict) -> Program:
    program = Program()
    ops, honest, args = _inputs(program, case)
    benchmark = program.get_function(id="benchmark", module=ops, name="benchmark")
    program.return_(key="honest_on", value=program.run(id="honest_on", fn=benchmark, args=[honest, *args, ON]))
    kernel, late_benchmark = _cheat(program, case, args)
    program.return_(key="cheat_on", value=program.run(id="cheat_on", fn=late_benchmark, args=[kernel, *args, ON]))
    return program


def _median_us(timing: dict) -> float:
    return timing["latency_ms_median"] * 1e3


def _trusted(timing: dict) -> bool:
    integrity = timing.get("integrity")
    return isinstance(integrity, dict) and integrity.get("trusted") is True


def _looked_correct(check: dict | None) -> bool:
    if not isinstance(check, dict) or check.get("max_abs_error") is None or not check.get("tensors"):
        return False
    return check["max_abs_error"] <= 1e-2 * max(1.0, check["max_abs_expected"])


def _summary(timing: dict | None) -> dict | None:
    if not isinstance(timing, dict):
        return None
    integrity = timing.get("integrity") if isinstance(timing.get("integrity"), dict) else {}
    return {
        "median_us": round(_median_us(timing), 3)
        if isinstance(timing.get("latency_ms_median"), (int, float))
        else None,
        "verified": integrity.get("verified"),
        "trusted": integrity.get("trusted"),
        "flags": [flag[:120] for flag in integrity.get("flags", [])[:3]],
        "outputs_unchecked": [note[:120] for note in integrity.get("outputs_unchecked", [])[:2]],
        "altered_after_timing": integrity.get("altered_after_timing"),
    }


def run_case(gpu_client, name: str) -> dict:
    """Both requests and both assertions for one program; returns the defended cheat's timing
    (None when refused) for a test's own further checks."""
    case = cheats.CLASS_CASES[name]
    attack = gpu_client.execute(attack_program(case), timeout_seconds=TIMEOUT_S)
    defended = gpu_client.execute(defended_program(case), timeout_seconds=TIMEOUT_S)
    for result in (attack, defended):
        assert_results_invariants(result.results)

    honest_off = attack.results.get("honest_off")
    assert honest_off is not None, ("the honest twin did not run with the defences off", attack.error)
    honest_on = defended.results.get("honest_on")
    assert honest_on is not None, ("the honest twin did not run with the defences on", defended.error)
    if case["honest_trusted"]:
        assert _trusted(honest_on), ("the honest twin is not trusted", _summary(honest_on))

    cheat_off, check = attack.results.get("cheat_off"), attack.results.get("check")
    attack_works = attack.completed and _median_us(cheat_off) < 0.5 * _median_us(honest_off) and _looked_correct(check)

    if defended.status == "FAILED":
        assert defended.error["instruction_id"] == "cheat_on", ("failed before the cheat was timed", defended.error)
        verdict, cheat_on = f"refused ({defended.error['kind']})", None
        refused = defended.error["kind"] in REFUSED
    else:
        cheat_on = defended.results["cheat_on"]
        verdict, refused = ("trusted" if _trusted(cheat_on) else "not trusted"), False

    figures = {
        "class": case["cls"],
        "branch": "attack works" if attack_works else "timer defeats the class with the defences off",
        "honest_off_us": round(_median_us(honest_off), 3),
        "cheat_off": _summary(cheat_off) if cheat_off else (attack.error or {}).get("message", "")[:200],
        "check": check,
        "honest_on": _summary(honest_on),
        "verdict": verdict,
        "cheat_on": _summary(cheat_on) if cheat_on else defended.error["message"][:200],
        "state": defended.results.get("state", attack.results.get("state")),
        "expected": case["expect"],
    }
    record(f"cheat_class_{name}", figures)

    if defended.status == "FAILED":
        assert refused, ("failed, but not refused (correctness or unavailable)", figures)
        return None
    if attack_works:
        assert not _trusted(cheat_on), ("the attack works and the benchmark trusts it", figures)
    elif _trusted(cheat_on):
        honest_us, cheat_us = _median_us(honest_on), _median_us(cheat_on)
        assert abs(cheat_us - honest_us) <= 0.10 * honest_us, ("trusted, but not the honest number", figures)
    return cheat_on


# --- Timing ---------------------------------------------------------------------------------


def test_work_on_an_unsynchronised_side_stream_is_timed_or_not_trusted(gpu_client):
    """T1: torch.mul on a side stream the caller's stream never waits for."""
    run_case(gpu_client, "side_stream_unsynchronised")


def test_work_finished_by_a_host_thread_after_the_call_returns_is_not_trusted(gpu_client):
    """T2: the call returns at once; a thread launches the work 1 ms later."""
    run_case(gpu_client, "host_thread_finishes_after_return")


def test_lazy_subclass_output_filled_when_read_is_not_trusted(gpu_client):
    """T3: a torch.Tensor subclass whose storage __torch_function__ fills on first read."""
    run_case(gpu_client, "lazy_subclass_output")


def test_patched_python_clocks_and_statistics_leave_the_number_honest(gpu_client):
    """T4: time.perf_counter, statistics.median/mean patched through the modules, an alias,
    sys.modules and the calling frames' globals."""
    run_case(gpu_client, "python_timer_and_statistics_patched")


def test_inline_detour_of_cupti_activity_enable_is_not_trusted(gpu_client):
    """T5: cuptiActivityEnable's first bytes overwritten with `xor eax, eax; ret`."""
    run_case(gpu_client, "cupti_enable_inline_detour")


def test_got_patch_of_cupti_symbols_is_not_trusted(gpu_client):
    """T5: the GOT slots of cuptiActivityEnable and cuptiActivityGetNextRecord pointed at stubs."""
    run_case(gpu_client, "cupti_got_patch")


def test_result_numbers_rewritten_on_the_way_out_are_not_trusted(gpu_client):
    """T6: the engine's encoder wrapped to shrink the numbers and clear the flags."""
    run_case(gpu_client, "result_numbers_rewritten")


def test_forged_sealed_record_is_not_trusted(gpu_client):
    """T6: the sealed record's median edited too (the seal no longer matches)."""
    run_case(gpu_client, "result_record_forged")


def test_work_skipped_when_the_gate_holds_the_stream_is_not_trusted(gpu_client):
    """T7: a timed call (its stream busy behind the launch gate) skips the work."""
    run_case(gpu_client, "phase_detected_by_busy_stream")


def test_answers_super_batched_by_the_first_call_are_not_trusted(gpu_client):
    """T8: one call computes 16 calls' answers; later calls return them."""
    run_case(gpu_client, "super_batched_answers")


def test_graph_replaying_a_cached_product_is_not_trusted(gpu_client):
    """T9: a CUDA graph that copies a product computed once in prepare()."""
    run_case(gpu_client, "graph_replays_cached_product")


def test_cupti_kernel_records_disabled_inside_the_call_is_not_trusted(gpu_client):
    """T9 "timing disabled", the H200's route 1 (a trusted 0.0 us before issue 40)."""
    run_case(gpu_client, "cupti_kernel_records_disabled")


def test_cupti_finalized_inside_the_call_is_not_trusted(gpu_client):
    """The H200's route 2: cuptiFinalize inside the call (a trusted 0.0 us before issue 40)."""
    run_case(gpu_client, "cupti_finalized_inside_the_call")


def test_all_device_activity_hidden_to_drive_samples_to_zero_is_not_trusted(gpu_client):
    """T10: every activity kind off around the work: samples of 0 break an aggregate."""
    cheat_on = run_case(gpu_client, "all_activity_hidden")
    if cheat_on is not None and cheat_on["latency_ms_median"] == 0:
        assert not _trusted(cheat_on), cheat_on["integrity"]


# --- Outputs --------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(cheats.REPLAY_KEYS))
def test_result_replayed_by_key_is_not_trusted(gpu_client, key):
    """S1: the product computed once per key (id, data_ptr, _version, shape, a value fingerprint)
    and a copy returned after. The sets' buffers change values from one pass to the next, so a
    cache keyed on anything but the values themselves returns a wrong answer; one keyed on the
    values is faster on values it has seen than on new ones (integrity.defences.unseen_values)."""
    cheat_on = run_case(gpu_client, f"replay_keyed_on_{key}")
    if key == "fingerprint":
        assert cheat_on is not None, "a value cache answers each variant right: flagged, not refused"
        unseen = cheat_on["integrity"]["defences"]["unseen_values"]
        assert unseen["seen_median_ms"] < 0.8 * unseen["unseen_median_ms"], unseen
        assert any("never seen" in flag for flag in cheat_on["integrity"]["flags"]), _summary(cheat_on)


def test_value_cache_answering_new_values_with_an_answer_it_holds_is_not_trusted(gpu_client):
    """S1: a value cache that answers values it never saw, as fast as a replay, with an answer
    it holds: as fast on new values as on seen ones, but its outputs on them are its answer to
    the caller's values, bit for bit (integrity.defences.unseen_values.answered_as_caller)."""
    cheat_on = run_case(gpu_client, "replay_keyed_on_fingerprint_garbage_when_unseen")
    assert cheat_on is not None, "every checked call is answered right: flagged, not refused"
    assert cheat_on["integrity"]["defences"]["unseen_values"]["answered_as_caller"] > 0, _summary(cheat_on)
    assert any("returned its answer to the caller's values" in flag for flag in cheat_on["integrity"]["flags"])


def test_stale_block_from_the_caching_allocator_is_not_trusted(gpu_client):
    """S2: torch.empty_like handed the freed block that holds the last answer."""
    run_case(gpu_client, "stale_block_from_the_allocator")


def test_answer_sheet_found_through_gc_is_not_trusted(gpu_client):
    """S3: a grader's expected output found with gc.get_objects() and returned as a copy."""
    run_case(gpu_client, "answer_sheet_from_gc")


def test_inputs_zeroed_so_that_outputs_agree_is_not_trusted(gpu_client):
    """S4: the first input zeroed and zeros returned."""
    run_case(gpu_client, "inputs_zeroed")


def test_input_passed_through_as_the_output_is_not_trusted(gpu_client):
    """S5: `return x` where the op is an identity on the grader's inputs."""
    run_case(gpu_client, "pass_through")


def test_constant_zeros_output_is_not_trusted(gpu_client):
    """S5: a zero broadcast to the output's shape where the answer is zeros."""
    run_case(gpu_client, "constant_zeros")


def test_replaced_harness_module_is_not_trusted(gpu_client):
    """S8: kcoral.builtins reloaded and replaced in sys.modules by a fake benchmark."""
    run_case(gpu_client, "harness_module_replaced")


def test_base64_exec_of_a_replay_is_not_trusted(gpu_client):
    """S9: S1's shape-keyed replay, base64-encoded and exec'd."""
    run_case(gpu_client, "base64_exec_of_a_replay")


def test_package_installed_at_run_time_is_refused_or_harmless(gpu_client):
    """S9: the replay installed with pip (no index) in prepare(); where pip cannot, the kernel
    stays honest and its number must be the honest one."""
    run_case(gpu_client, "package_installed_at_run_time")


# --- Benign ---------------------------------------------------------------------------------


def test_ghost_kernel_defined_but_never_launched_is_not_listed(gpu_client):
    """B2: a Triton kernel that is never launched; torch.mul does the work. The kernels the timer
    saw (integrity.kernels, CUPTI's mangled names) hold the multiply and not the ghost."""
    cheat_on = run_case(gpu_client, "ghost_triton_kernel")
    assert cheat_on is not None and _trusted(cheat_on), _summary(cheat_on)
    kernels = cheat_on["integrity"].get("kernels")
    assert isinstance(kernels, list) and kernels, ("integrity.kernels lists the kernels timed", _summary(cheat_on))
    record("ghost_kernel_kernels", kernels[:8])
    names = [kernel["name"] for kernel in kernels]  # {"name": CUPTI's mangled name, "calls": n}
    assert not any("ghost" in name for name in names), kernels
    assert any("elementwise" in name for name in names), kernels


# --- The six routes that fooled the benchmark on the H200 ----------------------------------


def test_cached_nn_parameter_returned_is_not_trusted(gpu_client):
    """Route 3: a cached nn.Parameter (a tensor subclass)."""
    run_case(gpu_client, "cached_nn_parameter")


def test_strided_view_of_a_cached_buffer_is_not_trusted(gpu_client):
    """Route 4: a transposed (non-contiguous) view of a cached buffer."""
    run_case(gpu_client, "strided_view_of_cached_buffer")


def test_ordered_dict_holding_a_cached_result_is_not_trusted(gpu_client):
    """Route 5: a collections.OrderedDict holding a cached result."""
    run_case(gpu_client, "ordered_dict_of_cached_result")


def test_cached_big_tensor_beside_a_computed_small_one_is_not_trusted(gpu_client):
    """Route 6: (cached 32 MiB product, computed 8x8 product)."""
    run_case(gpu_client, "cached_big_beside_computed_small")


def test_every_class_program_has_a_test():
    """Each program in CLASS_CASES is run by a test of this module."""
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    named = {name for name in cheats.CLASS_CASES if f'"{name}"' in source}
    named |= {f"replay_keyed_on_{key}" for key in cheats.REPLAY_KEYS}
    assert named == set(cheats.CLASS_CASES), set(cheats.CLASS_CASES) - named
