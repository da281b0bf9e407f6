"""The benchmark against reward hacks on a real GPU: each cheat (tests/gpu/cheats.py) is timed
beside the honest kernel in the same program, and must be caught (the request fails), refused,
or flagged (its result is not verified, or verified but not trusted, or its number is the
honest one). Controls: the honest median is the same with the defences on and off."""

import statistics

import pytest

from kcoral import Program
from kcoral.program import Register

import cheats
from test_gpu_server import record

N = 64 * 1024 * 1024  # 64 Mi float32: 256 MiB per tensor, ~127 us per torch.mul on the H200
N_L2 = 31_500_000 // 4  # a 31.5 MB input: fits the persisting part of the H200's L2

OPS = r"""
import torch
from kcoral.builtins import benchmark, benchmark_paired

def randn(n):
    generator = torch.Generator(device="cuda").manual_seed(0)
    return torch.randn(n, device="cuda", generator=generator)

def empty(n):
    return torch.empty(n, device="cuda")


def zeros(n):
    return torch.zeros(n, device="cuda")
"""


def _program(
    cheat: str | None,
    n: int = N,
    cfg: dict | None = None,
    honest: str = cheats.HONEST,
    arity: int = 2,
    prepare: str | None = None,
) -> Program:
    """honest_timing first; then the cheat module is imported (it may patch things) and a
    benchmark handle resolved after it times the cheat's kernel: kernel(x, y), or kernel(x) with
    arity 1. `prepare`: a function of the cheat module run with x once before its timing."""
    cfg = dict(cfg or {})
    program = Program()
    ops = program.upload(id="ops", kind="module", source=OPS)
    x = program.run(id="x", fn=program.get_function(id="randn", module=ops, name="randn"), args=[n])
    y = program.run(id="y", fn=program.get_function(id="empty", module=ops, name="empty"), args=[n])
    benchmark = program.get_function(id="benchmark", module=ops, name="benchmark")
    honest_module = program.upload(id="honest", kind="module", source=honest)
    honest_kernel = program.get_function(id="honest_kernel", module=honest_module, name="kernel")
    timing = program.run(id="honest_timing", fn=benchmark, args=[honest_kernel, x, y, cfg])
    program.return_(key="honest", value=timing)
    if cheat is not None:
        # A fresh output, as a grader gives each candidate (the honest benchmark filled y). Zeros,
        # not torch.empty: freed memory of this process may still hold x * 2, the answer.
        y2 = program.run(id="y2", fn=program.get_function(id="zeros", module=ops, name="zeros"), args=[n])
        module = program.upload(id="cheat", kind="module", source=cheat)
        late = program.upload(id="late", kind="module", source="from kcoral.builtins import benchmark\n")
        kernel = program.get_function(id="cheat_kernel", module=module, name="kernel")
        late_benchmark = program.get_function(id="late_benchmark", module=late, name="benchmark")
        if prepare is not None:
            program.run(
                id="cheat_prepare", fn=program.get_function(id="prepare", module=module, name=prepare), args=[x]
            )
        arguments = [x, y2][:arity]
        timing = program.run(id="cheat_timing", fn=late_benchmark, args=[kernel, *arguments, cfg])
        program.return_(key="cheat", value=timing)
    return program


def _run(client, program):
    return client.execute(program, timeout_seconds=180)


def _median_us(timing: dict) -> float:
    return timing["latency_ms_median"] * 1e3


def _trusted_honest(timing: dict) -> None:
    integrity = timing["integrity"]
    assert integrity["verified"] is True, integrity
    assert integrity["trusted"] is True, integrity
    assert timing["timer"] == "cupti"


def test_defences_leave_the_honest_median_alone(gpu_client):
    """Control: the 64 Mi-element multiply with every defence on, and with rotation and
    output checks off, in one program; medians within 1%."""
    program = Program()
    ops = program.upload(id="ops", kind="module", source=OPS)
    x = program.run(id="x", fn=program.get_function(id="randn", module=ops, name="randn"), args=[N])
    y = program.run(id="y", fn=program.get_function(id="empty", module=ops, name="empty"), args=[N])
    benchmark = program.get_function(id="benchmark", module=ops, name="benchmark")
    kernel = program.get_function(module=program.upload(id="k", kind="module", source=cheats.HONEST), name="kernel")
    for key, cfg in (("on", {}), ("off", {"rotate_inputs": False, "outputs": []}), ("on_again", {})):
        program.return_(key=key, value=program.run(id=key, fn=benchmark, args=[kernel, x, y, cfg]))
    result = _run(gpu_client, program)
    assert result.completed, result.error
    on, off, again = (result.results[k] for k in ("on", "off", "on_again"))
    for timing in (on, again):
        _trusted_honest(timing)
    # With no output checked, the same number is never trusted: a grader pays on checked work.
    assert off["integrity"]["verified"] is True and off["integrity"]["trusted"] is False
    assert off["integrity"]["outputs_unchecked"] and off["integrity"]["loosened"]["outputs"] == []
    assert on["integrity"]["defences"]["arguments"]["checked_outputs"] == [1]
    assert on["integrity"]["defences"]["arguments"]["argument_sets"] >= 2
    assert off["integrity"]["defences"]["arguments"]["argument_sets"] == 1
    medians = [_median_us(t) for t in (on, off, again)]
    record("mul_64mi_median_us_on_off_on", [round(m, 2) for m in medians])
    on_median = statistics.median([medians[0], medians[2]])
    assert abs(on_median - medians[1]) / medians[1] < 0.01
    assert 100 < medians[1] < 200  # ~127 us: 512 MiB at ~4 TB/s


@pytest.mark.parametrize("name", sorted(cheats.PYTHON_PATCHES))
def test_python_patching_is_caught(gpu_client, name):
    result = _run(gpu_client, _program(cheats.PYTHON_PATCHES[name]))
    assert result.completed, result.error
    honest, cheat = result.results["honest"], result.results["cheat"]
    _trusted_honest(honest)
    integrity = cheat.get("integrity", {})
    record(
        f"patch_{name}",
        {
            "honest_us": round(_median_us(honest), 2),
            "reported_us": round(_median_us(cheat), 3),
            "verified": integrity.get("verified"),
            "trusted": integrity.get("trusted"),
            "flags": integrity.get("flags", [])[:3],
        },
    )
    if name in ("flipped_device", "patched_summarize"):
        # Nothing to patch: the timer was chosen at worker start, and no Python computes the
        # statistics any more.
        _trusted_honest(cheat)
        assert abs(_median_us(cheat) - _median_us(honest)) / _median_us(honest) < 0.05
        return
    if integrity.get("verified") is not True:
        return  # a hand-made result: the server did not verify it
    # A sealed result: either its number is the honest one, or it is flagged.
    assert integrity["trusted"] is False and integrity["flags"], integrity
    honest_number = abs(_median_us(cheat) - _median_us(honest)) / _median_us(honest) < 0.05
    if name in ("patched_statistics_median", "settrace_rewrites_the_result"):
        assert honest_number, (cheat["latency_ms_median"], honest["latency_ms_median"])
    if name == "settrace_rewrites_the_result":
        assert integrity["altered_after_timing"] is True


@pytest.mark.parametrize("name", ["CACHED_ONCE", "CACHED_BY_POINTER", "STORAGE_SWAP_AFTER_ONE", "STORAGE_SWAP"])
def test_skipped_work_fails_the_output_check(gpu_client, name):
    result = _run(gpu_client, _program(getattr(cheats, name)))
    if name == "STORAGE_SWAP":
        # Never writes our buffer, not even in the probe call: y.set_(cached) redirects only the
        # Python object. Outputs are found from evidence (issue 23), so the call has no found
        # output: it must say so (outputs_unchecked) or be flagged; never trusted as checked.
        if not result.completed:
            assert result.error["kind"] == "correctness", result.error
            return
        integrity = result.results["cheat"]["integrity"]
        record(
            "storage_swap",
            {
                "trusted": integrity.get("trusted"),
                "flags": integrity.get("flags", [])[:3],
                "outputs_unchecked": integrity.get("outputs_unchecked"),
            },
        )
        assert not (integrity["trusted"] is True and integrity.get("outputs_unchecked") == []), integrity
        return
    assert result.status == "FAILED", result.results.get("cheat")
    assert result.error["kind"] == "correctness", result.error
    assert result.error["instruction_id"] == "cheat_timing"
    message = result.error["message"]
    assert "differ" in message and "reference call" in message, message
    _trusted_honest(result.results["honest"])
    record(f"caught_{name.lower()}", result.error["message"][:160])


def test_writes_on_first_call_only_is_never_trusted(gpu_client):
    """The probe call sees y written; every later call does nothing at all (no launch)."""
    result = _run(gpu_client, _program(cheats.WRITES_ON_FIRST_CALL_ONLY))
    if result.status == "FAILED":
        assert result.error["kind"] == "correctness", result.error
        assert result.error["instruction_id"] == "cheat_timing", result.error
        record("caught_writes_on_first_call_only", result.error["message"][:160])
        return
    _trusted_honest(result.results["honest"])
    integrity = result.results["cheat"]["integrity"]
    record(
        "caught_writes_on_first_call_only",
        {"trusted": integrity.get("trusted"), "flags": integrity.get("flags", [])[:3]},
    )
    assert integrity["trusted"] is False and integrity["flags"], integrity


def test_returned_cached_tensor_is_never_trusted(gpu_client):
    """kernel(x) returns the same tensor, computed once. A returned tensor is poisoned after its
    check, so a cached one comes back as poison (refused); and storage returned again is zeroed
    before a probe call, so one the call never rewrites is found to be a constant, and a call
    whose only outputs are constants is flagged (src/native/returned_outputs.h). Either way,
    never trusted."""
    result = _run(gpu_client, _program(cheats.RETURNS_CACHED_TENSOR, arity=1))
    if result.status == "FAILED":
        assert result.error["kind"] == "correctness", result.error
        assert result.error["instruction_id"] == "cheat_timing", result.error
        record("caught_returns_cached_tensor", result.error["message"][:160])
        return
    _trusted_honest(result.results["honest"])
    integrity = result.results["cheat"]["integrity"]
    record(
        "caught_returns_cached_tensor",
        {
            "trusted": integrity.get("trusted"),
            "flags": integrity.get("flags", [])[:3],
            "returned": integrity["defences"].get("returned"),
        },
    )
    assert integrity["trusted"] is False and integrity["flags"], integrity


def test_graph_replaying_a_precomputed_copy_is_never_trusted_as_checked(gpu_client):
    """A graph that only copies an answer computed once: refused, flagged, or trusted with the
    graph's output reported unchecked; never trusted with nothing left unchecked."""
    result = _run(gpu_client, _program(cheats.GRAPH_REPLAYS_PRECOMPUTED_COPY, arity=1, prepare="prepare"))
    if result.status == "FAILED":
        record(
            "caught_graph_precomputed_copy", {"error": result.error["kind"], "message": result.error["message"][:160]}
        )
        return
    _trusted_honest(result.results["honest"])
    integrity = result.results["cheat"]["integrity"]
    record(
        "caught_graph_precomputed_copy",
        {
            "trusted": integrity.get("trusted"),
            "flags": integrity.get("flags", [])[:3],
            "outputs_unchecked": integrity.get("outputs_unchecked"),
        },
    )
    assert not (integrity["trusted"] is True and integrity.get("outputs_unchecked") == []), integrity


def test_patched_checker_does_not_pass_a_wrong_output(gpu_client):
    program = Program()
    ops = program.upload(id="ops", kind="module", source=OPS + "from kcoral.builtins import assert_close\n")
    x = program.run(id="x", fn=program.get_function(id="randn", module=ops, name="randn"), args=[1 << 20])
    y = program.run(id="y", fn=program.get_function(id="empty", module=ops, name="empty"), args=[1 << 20])
    expected = program.run(id="e", fn=program.get_function(id="empty2", module=ops, name="empty"), args=[1 << 20])
    honest = program.get_function(module=program.upload(id="h", kind="module", source=cheats.HONEST), name="kernel")
    program.run(id="reference", fn=honest, args=[x, expected])
    cheat = program.upload(id="cheat", kind="module", source=cheats.WRONG_WITH_PATCHED_CHECKER)
    program.run(id="wrong", fn=program.get_function(module=cheat, name="kernel"), args=[x, y])
    check = program.run(id="check", fn=program.get_function(module=ops, name="assert_close"), args=[y, expected])
    program.return_(key="check", value=check)
    result = _run(gpu_client, program)
    assert result.status == "FAILED" and result.error["instruction_id"] == "check", result.error
    assert result.error["kind"] == "correctness"
    record("caught_patched_checker", result.error["message"][:160])


def test_persisting_l2_window_does_not_survive_the_flush(gpu_client):
    """Rotation off, so the persisting-L2 reset alone must defeat the window."""
    cfg = {"rotate_inputs": False}
    result = _run(gpu_client, _program(cheats.PERSISTING_L2, n=N_L2, cfg=cfg, honest=cheats.HONEST_ON_A_STREAM))
    assert result.completed, result.error
    honest, cheat = result.results["honest"], result.results["cheat"]
    _trusted_honest(honest)
    record("persisting_l2_us", {"honest": round(_median_us(honest), 3), "window": round(_median_us(cheat), 3)})
    assert abs(_median_us(cheat) - _median_us(honest)) / _median_us(honest) < 0.05
    assert any("persisting-L2" in flag for flag in cheat["integrity"]["flags"]), cheat["integrity"]


def test_work_in_a_helper_process_is_flagged(gpu_client):
    cfg = {"rotate_inputs": False, "warmup": 2, "repeat": 20}
    result = _run(gpu_client, _program(cheats.HELPER_PROCESS, n=1 << 20, cfg=cfg))
    assert result.completed, result.error
    cheat = result.results["cheat"]
    record("helper_process", {"reported_us": round(_median_us(cheat), 3), "flags": cheat["integrity"]["flags"][:3]})
    assert cheat["integrity"]["trusted"] is False
    assert any("process" in flag for flag in cheat["integrity"]["flags"]), cheat["integrity"]


def test_hidden_api_records_do_not_hide_the_work(gpu_client):
    result = _run(gpu_client, _program(cheats.HIDDEN_API_RECORDS))
    assert result.completed, result.error
    honest, cheat = result.results["honest"], result.results["cheat"]
    record(
        "hidden_api_records_us",
        {
            "honest": round(_median_us(honest), 2),
            "hidden": round(_median_us(cheat), 2),
            "unattributed": cheat["integrity"]["unattributed_activities"],
        },
    )
    # Caught either way: the hidden launch is timed by device time (counted as unattributed),
    # or the records were not hidden at all; the number is never the 1-element launch's.
    assert cheat["latency_ms_median"] >= 0.95 * honest["latency_ms_median"]


def test_sabotaged_baseline_is_flagged(gpu_client):
    """The cheat module makes torch.mul slow after the honest timing; the reference timed after
    it names the patched op."""
    program = _program(cheats.SABOTAGED_BASELINE)
    # The reference, timed after the sabotage, through the same genuine benchmark handle.
    reference = program.get_function(id="late_reference", module=Register("honest"), name="kernel")
    late = program.run(
        id="reference_timing", fn=Register("benchmark"), args=[reference, Register("x"), Register("y"), {}]
    )
    program.return_(key="reference_after", value=late)
    result = _run(gpu_client, program)
    assert result.completed, result.error
    before, after = result.results["honest"], result.results["reference_after"]
    record(
        "sabotaged_baseline_us",
        {
            "before": round(_median_us(before), 2),
            "after": round(_median_us(after), 2),
            "flags": after["integrity"]["flags"][:3],
        },
    )
    assert after["integrity"]["trusted"] is False
    assert any("torch.mul" in flag for flag in after["integrity"]["flags"]), after["integrity"]


def test_paired_mode_reports_a_ratio_with_an_interval(gpu_client):
    program = Program()
    ops = program.upload(id="ops", kind="module", source=OPS)
    x = program.run(id="x", fn=program.get_function(id="randn", module=ops, name="randn"), args=[N])
    y = program.run(id="y", fn=program.get_function(id="empty", module=ops, name="empty"), args=[N])
    paired = program.get_function(id="paired", module=ops, name="benchmark_paired")
    kernels = program.upload(
        id="k",
        kind="module",
        source=cheats.HONEST + "\ndef twice(x, y):\n    torch.mul(x, 2.0, out=y)\n    torch.mul(x, 2.0, out=y)\n",
    )
    same = program.get_function(id="same", module=kernels, name="kernel")
    twice = program.get_function(id="twice", module=kernels, name="twice")
    program.return_(key="same", value=program.run(id="r1", fn=paired, args=[same, same, x, y, {}]))
    program.return_(key="twice", value=program.run(id="r2", fn=paired, args=[twice, same, x, y, {}]))
    result = _run(gpu_client, program)
    assert result.completed, result.error
    same_result, twice_result = result.results["same"], result.results["twice"]
    for timing in (same_result, twice_result):
        _trusted_honest(timing)
        assert timing["outputs_match_reference"] is True
    record(
        "paired_ratio",
        {
            "same": [round(same_result[k], 4) for k in ("ratio_ci95_low", "ratio_median", "ratio_ci95_high")],
            "twice": [round(twice_result[k], 4) for k in ("ratio_ci95_low", "ratio_median", "ratio_ci95_high")],
        },
    )
    assert (
        same_result["ratio_ci95_low"] <= 1.0 <= same_result["ratio_ci95_high"]
        or abs(same_result["ratio_median"] - 1) < 0.01
    )
    assert 1.8 < twice_result["ratio_median"] < 2.2


def test_gpu_state_is_reported_and_clock_changes_refused(gpu_client):
    program = _program(None, n=1 << 20)
    clocks = program.upload(id="clocks", kind="module", source=cheats.SET_CLOCKS)
    attempt = program.run(id="attempt", fn=program.get_function(module=clocks, name="try_to_lock_clocks"), args=[])
    program.return_(key="attempt", value=attempt)
    result = _run(gpu_client, program)
    assert result.completed, result.error
    attempt = result.results["attempt"]
    assert attempt["lock"] != 0 and attempt["application"] != 0  # NVML_ERROR_NO_PERMISSION (4) or the like
    gpu = result.results["honest"]["integrity"]["gpu"]
    record("gpu_state", {"attempt": attempt, "gpu": gpu})
    assert gpu["start"]["sm_mhz"] > 0 and gpu["end"]["sm_mhz"] > 0
    assert gpu["uuid"].startswith("GPU-")


def test_callers_tensors_are_never_poisoned(gpu_client):
    """The benchmark runs on copies: the caller's output gets the kernel's result (as the
    reference's benchmark leaves it). An output-first kernel f(y, x) has its output found where
    it stands (argument 0, issue 23): trusted, and the caller's input stays intact."""
    n = 1 << 20
    program = Program()
    ops = program.upload(id="ops", kind="module", source=OPS + "from kcoral.builtins import assert_close\n")
    randn, empty = (program.get_function(id=name, module=ops, name=name) for name in ("randn", "empty"))
    x = program.run(id="x", fn=randn, args=[n])
    x_again = program.run(id="x_again", fn=randn, args=[n])  # the same seed: equal to x
    y = program.run(id="y", fn=empty, args=[n])
    expected = program.run(id="expected", fn=empty, args=[n])
    kernels = program.upload(
        id="k", kind="module", source=cheats.HONEST + "\ndef output_first(y, x):\n    torch.mul(x, 2.0, out=y)\n"
    )
    kernel = program.get_function(id="kernel", module=kernels, name="kernel")
    output_first = program.get_function(id="output_first", module=kernels, name="output_first")
    program.run(id="reference", fn=kernel, args=[x, expected])
    benchmark = program.get_function(id="benchmark", module=ops, name="benchmark")
    assert_close = program.get_function(id="assert_close", module=ops, name="assert_close")
    timing = program.run(id="timing", fn=benchmark, args=[kernel, x, y, {}])  # y never written before
    program.return_(key="timing", value=timing)
    program.return_(key="y_filled", value=program.run(id="c1", fn=assert_close, args=[y, expected]))
    guessed = program.run(id="guessed", fn=benchmark, args=[output_first, y, x, {}])
    program.return_(key="guessed", value=guessed)
    program.return_(key="x_intact", value=program.run(id="c2", fn=assert_close, args=[x, x_again]))
    result = _run(gpu_client, program)
    assert result.completed, result.error
    arguments = result.results["timing"]["integrity"]["defences"]["arguments"]
    assert arguments["checked_outputs"] == [1]
    assert "1" in arguments["outputs_found_by"], arguments  # with a sentence saying how
    assert result.results["y_filled"]["passed"] is True
    assert result.results["x_intact"]["passed"] is True
    guessed = result.results["guessed"]["integrity"]
    assert guessed["verified"] is True and guessed["trusted"] is True, guessed
    assert guessed["defences"]["arguments"]["checked_outputs"] == [0], guessed["defences"]
