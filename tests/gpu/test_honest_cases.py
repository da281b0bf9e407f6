"""Issues 23 and 40, case by case: honest kernels the old benchmark misjudged, each never refused
now, and trusted with every output checked unless it declares an output unverifiable. The patterns
are tests/gpu/honest_patterns.py's; the helpers test_honest_corpus.py's."""

import statistics

import pytest

from kcoral import Program
from kcoral.program import Register

import honest_patterns as hp
from test_gpu_server import record
from test_honest_corpus import (
    TIMEOUT_S,
    allowed_difference_us,
    assert_declared,
    assert_trusted,
    assert_trusted_at_no_cost,
    describe,
    dig,
    run_pattern,
    throttle_reasons,
)

ON_AND_OFF = ("on_1", "off_1")


def _returned(outcome: dict, key: str = "on_1") -> list:
    return dig(outcome["on"][key], "integrity", "defences", "returned", "checked", default=None)


def test_functional_return_a_plus_b_is_trusted(gpu_client):
    """KernelBench's forward(a, b) returning a + b: the returned tensor is the output."""
    outcome = run_pattern(gpu_client, hp.BY_NAME["kernelbench_forward_a_plus_b"], ON_AND_OFF)
    assert_trusted(outcome)
    integrity = outcome["on"]["on_1"]["integrity"]
    assert _returned(outcome) == ["return"], describe(outcome)
    assert integrity["outputs_unchecked"] == [], describe(outcome)
    assert dig(integrity, "defences", "arguments", "checked_outputs") == [], describe(outcome)  # a, b: inputs
    record("honest_case_a_plus_b_us", {"on": round(outcome["on_us"], 2), "off": round(outcome["off_us"], 2)})


def test_matmul_returning_bf16_is_trusted(gpu_client):
    outcome = run_pattern(gpu_client, hp.BY_NAME["matmul_returns_new_bf16"], ON_AND_OFF)
    assert_trusted(outcome)
    assert _returned(outcome) == ["return"], describe(outcome)
    assert outcome["on"]["on_1"]["integrity"]["outputs_unchecked"] == [], describe(outcome)


def test_tuple_return_is_trusted(gpu_client):
    outcome = run_pattern(gpu_client, hp.BY_NAME["tuple_return"], ON_AND_OFF)
    assert_trusted(outcome)
    assert sorted(_returned(outcome) or []) == ["return[0]", "return[1]"], describe(outcome)
    assert outcome["on"]["on_1"]["integrity"]["outputs_unchecked"] == [], describe(outcome)


CHECKS = r"""
def double(x):
    return x * 2.0
"""


def test_destination_first_is_found_and_input_never_poisoned(gpu_client):
    """f(y, x): the probe finds argument 0 as the output; x, an input, is never poisoned, and the
    caller's x is intact afterwards."""
    pattern = hp.BY_NAME["destination_first"]
    program = Program()
    kernel, (y, x), helpers = hp.add_pattern(program, pattern)
    again = program.run(id="setup_again", fn=Register("setup"), args=[])  # the same seed: x's values
    x_again = program.run(id="x_again", fn=Register("pick"), args=[again, 1])
    benchmark = program.get_function(id="benchmark", module=helpers, name="benchmark")
    check_close = program.get_function(id="check_close", module=helpers, name="check_close")
    double = program.get_function(
        id="double", module=program.upload(id="checks", kind="module", source=CHECKS), name="double"
    )
    program.return_(key="on_1", value=program.run(id="on_1", fn=benchmark, args=[kernel, y, x, hp.ON]))
    program.return_(key="x_intact", value=program.run(id="c1", fn=check_close, args=[x, x_again]))
    expected = program.run(id="expected", fn=double, args=[x_again])
    program.return_(key="y_filled", value=program.run(id="c2", fn=check_close, args=[y, expected]))
    result = gpu_client.execute(program, timeout_seconds=TIMEOUT_S)
    assert result.completed, result.error
    integrity = result.results["on_1"]["integrity"]
    assert integrity["verified"] is True and integrity["trusted"] is True, integrity
    assert dig(integrity, "defences", "arguments", "checked_outputs") == [0], integrity
    assert integrity["outputs_unchecked"] == [], integrity
    assert result.results["x_intact"]["passed"] is True, result.results["x_intact"]
    record(
        "honest_case_destination_first",
        {
            "checked_outputs": dig(integrity, "defences", "arguments", "checked_outputs"),
            "x_intact": result.results["x_intact"]["passed"],
            "y_holds_the_result": result.results["y_filled"]["passed"],  # the reference's outputs, as documented
        },
    )


GRAPHS = [
    "cuda_graph_returns_static_out",
    "cuda_graph_returns_clone",
    "cuda_graph_on_captured_arguments",
    "cuda_graph_writes_nothing_visible",
]


@pytest.mark.parametrize("name", GRAPHS)
def test_cuda_graph_replay_is_checked_or_declared(gpu_client, name):
    """A replayed graph reads the buffers it was captured with. Issue 40: its outputs are checked
    when they follow the rotated input values (a static output, a clone of it), and a graph
    captured on the very tensors passed as the call's arguments runs on them in place, checked;
    all trusted. One whose result stays in its own buffer cannot be checked: the pattern declares
    it unverifiable, and it runs, untrusted for that declaration alone."""
    pattern = hp.BY_NAME[name]
    outcome = run_pattern(gpu_client, pattern, ON_AND_OFF)
    if pattern.unverifiable:
        assert_declared(outcome)
    else:
        assert_trusted(outcome)
    integrity = outcome["on"]["on_1"]["integrity"]
    if not pattern.unverifiable:
        assert dig(integrity, "defences", "arguments", "checked_outputs") == pattern.checked_outputs, describe(outcome)
        assert sorted(_returned(outcome) or []) == sorted(pattern.returned), describe(outcome)
    unchecked = integrity["outputs_unchecked"]
    record(
        f"honest_case_{name}",
        {
            "outputs_unchecked": unchecked,
            "returned": _returned(outcome),
            "on_us": round(outcome["on_us"], 2),
            "off_us": round(outcome["off_us"], 2),
        },
    )


def test_torch_compile_is_trusted(gpu_client):
    """torch.compile's compile workers may still run beside the timed calls: a condition (they
    hold no GPU), never a flag. The full corpus program: the server's build cache may hold its
    compile from the corpus."""
    outcome = run_pattern(gpu_client, hp.BY_NAME["torch_compile_default"])
    assert_trusted(outcome)
    processes = [c for c in outcome["conditions"] if "process" in c]
    record(
        "honest_case_torch_compile",
        {
            "on_us": round(outcome["on_us"], 2),
            "off_us": round(outcome["off_us"], 2),
            "process_conditions": processes[:4],
        },
    )
    for timing in outcome["on"].values():
        assert not any("process" in flag for flag in timing["integrity"]["flags"]), describe(outcome)


@pytest.mark.parametrize("name", ["index_add_atomics", "triton_split_k_atomic_add", "index_add_bf16_atomics"])
def test_index_add_atomics_are_not_refused(gpu_client, name):
    """Float atomics sum in a different order on every call: the check's tolerance comes from
    the spread of the reference calls (for 16-bit floats, of as many as the spread needs), and
    the result says where it came from."""
    outcome = run_pattern(gpu_client, hp.BY_NAME[name], ON_AND_OFF)
    assert_trusted(outcome)
    check = dig(outcome["on"]["on_1"], "integrity", "defences", "output_check")
    assert isinstance(check, dict), describe(outcome)
    assert isinstance(check.get("source"), str) and check["source"], check
    assert {"rtol", "atol", "source", "reference_spread"} <= set(check), check
    record(f"honest_case_{name}_output_check", check)


def test_declared_unverifiable_dropout_runs_untrusted_for_its_declaration_alone(gpu_client):
    """Issue 40: dropout in training mode is random by design. Declared (cfg `unverifiable`:
    ["return"]), it is never refused: it is timed at no cost, named in outputs_unchecked as
    declared, and untrusted for that alone (no flag)."""
    pattern = hp.BY_NAME["dropout_train_declared_unverifiable"]
    outcome = run_pattern(gpu_client, pattern, ON_AND_OFF)
    assert_declared(outcome)
    difference = abs(outcome["on_us"] - outcome["off_us"])
    assert difference <= allowed_difference_us(outcome["off_us"]), describe(outcome)
    integrity = outcome["on"]["on_1"]["integrity"]
    record(
        "honest_case_dropout_declared",
        {
            "outputs_unchecked": integrity["outputs_unchecked"],
            "returned": dig(integrity, "defences", "returned"),
            "on_us": round(outcome["on_us"], 2),
            "off_us": round(outcome["off_us"], 2),
        },
    )


@pytest.mark.parametrize("name", ["item_inside_call", "synchronize_before_return"])
def test_synchronizing_call_stops_the_gate_and_stays_trusted(gpu_client, name):
    """A call that waits for the GPU inside (.item() mid-way, torch.cuda.synchronize() before it
    returns) would wait for the launch gate: the gate times out once (20 ms), the timer stops
    gating for the rest of that benchmark and says so in `conditions`. The result is trusted and,
    with `launch_gate` left on in both, the defences-on median is within 5% of the defences-off one."""
    outcome = run_pattern(gpu_client, hp.BY_NAME[name])
    assert_trusted_at_no_cost(outcome)
    figures = {}
    for key, timing in [*outcome["on"].items(), *outcome["off"].items()]:
        integrity = timing["integrity"]
        gate = dig(integrity, "defences", "launch_gate")
        assert isinstance(gate, dict) and gate.get("enabled") is True, (key, gate)
        assert gate.get("timeouts") == 1, (key, gate, describe(outcome))
        assert "launch_gate" not in integrity.get("loosened", {}), (key, integrity.get("loosened"))
        noted = [c for c in integrity.get("conditions", []) if "launch gate" in c]
        assert any("timed out" in c for c in noted), (key, integrity.get("conditions"))
        assert not any("launch gate" in flag for flag in integrity.get("flags", [])), (key, integrity["flags"])
        figures[key] = {
            "gated_calls": gate.get("gated_calls"),
            "timeouts": gate.get("timeouts"),
            "us": round(timing["latency_ms_median"] * 1e3, 2),
        }
    record(
        f"honest_case_{name}_gate",
        {**figures, "conditions": [c for c in outcome["conditions"] if "launch gate" in c][:2]},
    )


def test_two_streams_on_and_off_agree(gpu_client):
    """The multiply split over two streams: defences on and off within 5% in each of three runs,
    and the three runs within 5% of their median."""
    pattern = hp.BY_NAME["two_streams"]
    outcomes = [run_pattern(gpu_client, pattern) for _ in range(3)]
    for outcome in outcomes:
        assert_trusted_at_no_cost(outcome)
    on = [o["on_us"] for o in outcomes]
    middle = statistics.median(on)
    record(
        "honest_case_two_streams_us",
        {"on": [round(v, 2) for v in on], "off": [round(o["off_us"], 2) for o in outcomes]},
    )
    for value in on:
        assert abs(value - middle) <= allowed_difference_us(middle), on


def test_power_cap_is_a_condition_not_a_flag(gpu_client):
    """Throttling (a power cap, a thermal slowdown) is the machine's state: if NVML reported a
    reason at the start or the end, it is a condition, and the result is still trusted."""
    outcome = run_pattern(gpu_client, hp.BY_NAME["compute_bound_matmul_4096"])
    assert_trusted(outcome)
    seen = {}
    for key, timing in [*outcome["on"].items(), *outcome["off"].items()]:
        reasons = throttle_reasons(timing)
        seen[key] = reasons
        conditions = timing["integrity"].get("conditions", [])
        for reason in reasons:
            assert any(reason in condition for condition in conditions), (key, reason, conditions)
            assert not any(reason in flag for flag in timing["integrity"].get("flags", [])), (key, reason)
    record(
        "honest_case_throttling",
        {"throttled": any(seen.values()), "reasons": seen, "on_us": round(outcome["on_us"], 2)},
    )


PAIRED = (
    hp.PRELUDE
    + r"""

def setup():
    return [randn(1 << 24, seed=1), empty(1 << 24)]


def returning(x, y):
    return x * 2.0


def destination_last(x, y):
    torch.mul(x, 2.0, out=y)
"""
)


def test_paired_honest_candidate_and_reference_are_trusted(gpu_client):
    """benchmark_paired of two honest kernels of the same arguments, one returning its result
    and one writing it into the last argument, in both roles."""
    program = Program()
    module = program.upload(id="paired", kind="module", source=PAIRED)
    helpers = program.upload(id="helpers", kind="module", source=hp.HELPERS)
    pick = program.get_function(id="pick", module=helpers, name="pick")
    values = program.run(id="values", fn=program.get_function(id="setup", module=module, name="setup"), args=[])
    x, y = (program.run(id=f"arg{i}", fn=pick, args=[values, i]) for i in range(2))
    paired = program.get_function(id="benchmark_paired", module=helpers, name="benchmark_paired")
    returning = program.get_function(id="returning", module=module, name="returning")
    destination_last = program.get_function(id="destination_last", module=module, name="destination_last")
    program.return_(
        key="returning_vs_destination",
        value=program.run(id="r1", fn=paired, args=[returning, destination_last, x, y, hp.ON]),
    )
    program.return_(
        key="destination_vs_returning",
        value=program.run(id="r2", fn=paired, args=[destination_last, returning, x, y, hp.ON]),
    )
    result = gpu_client.execute(program, timeout_seconds=TIMEOUT_S)
    assert result.completed, result.error
    figures = {}
    for key in ("returning_vs_destination", "destination_vs_returning"):
        timing = result.results[key]
        integrity = timing["integrity"]
        assert integrity["verified"] is True and integrity["trusted"] is True, (key, integrity)
        assert timing["outputs_match_reference"] is True, (key, timing)
        reference = timing.get("reference", {}).get("integrity")
        if reference is not None:  # the reference's own report, where the result has one
            assert reference.get("trusted", True) is True, (key, reference)
        figures[key] = {
            "ratio_median": round(timing["ratio_median"], 4),
            "outputs_unchecked": integrity.get("outputs_unchecked"),
        }
    record("honest_case_paired", figures)
