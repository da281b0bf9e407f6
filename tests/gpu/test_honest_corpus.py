"""Issues 23 and 40: the defended benchmark judges honest code fairly, and refuses none of it.

Every pattern of tests/gpu/honest_patterns.py runs as one program (one request, one worker):
setup once, then the benchmark with the defences on and off, alternating (on, off, on, off).
No program is ever refused, and each defences-on median is within 5% of the defences-off median
of the same run (launch-bound kernels: max(5%, 0.3 us)). The verdict of each defences-on result:
- a pattern that declares nothing unverifiable must be verified and trusted, with no flag and
  outputs_unchecked empty: since issue 40 `trusted` means verified, no flag and every output
  checked, so nothing may be left unchecked (graph replays, views and empty tensors included);
- a pattern that declares outputs random by design (cfg `unverifiable`, Pattern.unverifiable)
  must be verified, with no flag, every outputs_unchecked entry "declared unverifiable: ..." and
  each declared output named: untrusted for its declaration alone.
The corpus runs twice (two rounds, separate requests) and must get the same verdict both times.

Budget: 80 patterns x 2 rounds in under 6 minutes on an H200 (about 1.5-2.5 s a request;
torch.compile (default and reduce-overhead), Triton and the TVM-FFI build compile in their own
requests, and their caches are kept by the server for the second round; the 5 GiB input's
request copies the most).
"""

import os
import statistics

import pytest

import honest_patterns as hp
from test_gpu_server import record

# KCORAL_CORPUS_ROUNDS=1 runs one round (a short device lease); both by default.
ROUNDS = tuple(int(r) for r in os.environ.get("KCORAL_CORPUS_ROUNDS", "1,2").split(","))
TIMEOUT_S = 120  # the tests' server caps a request at 120 s; a cold torch.compile takes 10-30 s
BENIGN_THROTTLE = {"gpu idle", "applications clocks setting"}  # never even a condition
DECLARED = "declared unverifiable"  # how outputs_unchecked names an output cfg `unverifiable` declares
TRUSTED = "trusted"
BUDGET_S = 360  # the whole corpus, both rounds, in requests' time

# (pattern name, round) -> summary; filled by the first test that needs it.
OUTCOMES: dict[tuple[str, int], dict] = {}


def dig(tree, *path, default=None):
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return default
        tree = tree[key]
    return tree


def throttle_reasons(timing: dict) -> list[str]:
    """Throttle reasons NVML reported at the start or the end of the timed loop, benign ones left out."""
    seen = []
    for end in ("start", "end"):
        for reason in dig(timing, "integrity", "gpu", end, "throttle_reasons", default=None) or []:
            if reason not in BENIGN_THROTTLE and reason not in seen:
                seen.append(reason)
    return seen


def declared_only(integrity: dict) -> bool:
    """Verified, no flag, and untrusted only for outputs the pattern declared unverifiable."""
    unchecked = integrity.get("outputs_unchecked") or []
    return (
        integrity.get("verified") is True
        and integrity.get("flags") == []
        and bool(unchecked)
        and all(isinstance(u, str) and u.startswith(DECLARED) for u in unchecked)
    )


def expected_verdict(pattern: hp.Pattern) -> str:
    """What every defences-on result of the pattern must say: trusted, or untrusted only for
    what it declares unverifiable."""
    return DECLARED if pattern.unverifiable else TRUSTED


def allowed_difference_us(off_us: float) -> float:
    """5% of the defences-off median; for a kernel under 10 us, at least 0.3 us."""
    return max(0.05 * off_us, 0.3) if off_us < 10 else 0.05 * off_us


def summarize(pattern: hp.Pattern, result, order: tuple = hp.ORDER) -> dict:
    """What one request of pattern_program said: the timings, the verdict and the figures."""
    outcome = {
        "name": pattern.name,
        "kind": pattern.kind,
        "status": result.status,
        "error": result.error,
        "on": {},
        "off": {},
        "verdict": None,
        "elapsed_s": result.elapsed_ms / 1e3,
    }
    if not result.completed:
        refused = (result.error or {}).get("kind") == "correctness"
        outcome["verdict"] = "refused" if refused else f"failed ({(result.error or {}).get('kind')})"
        return outcome
    for key in order:
        outcome["on" if key.startswith("on") else "off"][key] = result.results[key]
    on, off = list(outcome["on"].values()), list(outcome["off"].values())
    outcome["on_us"] = statistics.median(t["latency_ms_median"] * 1e3 for t in on)
    if off:
        outcome["off_us"] = statistics.median(t["latency_ms_median"] * 1e3 for t in off)
        outcome["ratio"] = outcome["on_us"] / outcome["off_us"]
    integrities = [t.get("integrity", {}) for t in on]
    if all(i.get("verified") is True and i.get("trusted") is True for i in integrities):
        outcome["verdict"] = TRUSTED
    elif all(i.get("trusted") is False and declared_only(i) for i in integrities):
        outcome["verdict"] = DECLARED
    else:
        outcome["verdict"] = "untrusted"
    outcome["flags"] = sorted({f for i in integrities for f in i.get("flags", [])})
    outcome["conditions"] = sorted({c for i in integrities for c in i.get("conditions", [])})
    outcome["outputs_unchecked"] = sorted({u for i in integrities for u in i.get("outputs_unchecked", [])})
    outcome["throttle"] = sorted({r for t in [*on, *off] for r in throttle_reasons(t)})
    return outcome


def run_pattern(client, pattern: hp.Pattern, order: tuple = hp.ORDER) -> dict:
    return summarize(pattern, client.execute(hp.pattern_program(pattern, order), timeout_seconds=TIMEOUT_S), order)


def outcome_of(client, name: str, round_: int) -> dict:
    if (name, round_) not in OUTCOMES:
        OUTCOMES[(name, round_)] = run_pattern(client, hp.BY_NAME[name])
    return OUTCOMES[(name, round_)]


def describe(outcome: dict) -> str:
    """The assertion message: everything a reader needs to see why."""
    keys = ("verdict", "error", "on_us", "off_us", "ratio", "flags", "conditions", "outputs_unchecked", "throttle")
    shown = {k: outcome.get(k) for k in keys if outcome.get(k) not in (None, [], {})}
    for key, timing in outcome.get("on", {}).items():
        integrity = timing.get("integrity", {})
        shown[key] = {
            k: integrity.get(k)
            for k in ("verified", "trusted", "flags", "conditions", "outputs_unchecked", "loosened", "reason")
        }
        shown[key]["checked_outputs"] = dig(integrity, "defences", "arguments", "checked_outputs")
        shown[key]["returned"] = dig(integrity, "defences", "returned", "checked")
    return f"{outcome['name']}: {shown}"


def assert_trusted(outcome: dict) -> None:
    """Completed (never refused), and every defences-on result verified and trusted, with no
    flag and every output checked (outputs_unchecked empty)."""
    pattern = hp.BY_NAME[outcome["name"]]
    assert not pattern.unverifiable, f"{pattern.name} declares {pattern.unverifiable}: assert_declared"
    assert outcome["status"] == "COMPLETED", describe(outcome)
    for key, timing in outcome["on"].items():
        integrity = timing.get("integrity", {})
        assert timing.get("timer") == "cupti", (key, describe(outcome))
        assert integrity.get("verified") is True, (key, describe(outcome))
        assert integrity.get("trusted") is True, (key, describe(outcome))
        assert integrity.get("flags") == [], (key, describe(outcome))
        assert integrity.get("outputs_unchecked") == [], (key, describe(outcome))
        # Only what the pattern asked for (the L2-resident one's flush_l2 False) may loosen a check.
        assert set(integrity.get("loosened", {})) <= set(pattern.cfg), (key, describe(outcome))


def assert_declared(outcome: dict) -> None:
    """A pattern that declares outputs unverifiable: completed (never refused), every
    defences-on result verified with no flag, untrusted, and every outputs_unchecked entry one
    of its declarations ("declared unverifiable: ..."), each declared output named."""
    pattern = hp.BY_NAME[outcome["name"]]
    assert pattern.unverifiable, f"{pattern.name} declares nothing: assert_trusted"
    assert outcome["status"] == "COMPLETED", describe(outcome)
    for key, timing in outcome["on"].items():
        integrity = timing.get("integrity", {})
        assert timing.get("timer") == "cupti", (key, describe(outcome))
        assert integrity.get("verified") is True, (key, describe(outcome))
        assert integrity.get("flags") == [], (key, describe(outcome))
        assert integrity.get("trusted") is False, (key, describe(outcome))
        unchecked = integrity.get("outputs_unchecked") or []
        assert unchecked, (key, describe(outcome))
        for entry in unchecked:
            assert isinstance(entry, str) and entry.startswith(DECLARED), (key, entry, describe(outcome))
        for declared in pattern.unverifiable:
            assert any(declared in entry for entry in unchecked), (key, declared, describe(outcome))
        assert set(integrity.get("loosened", {})) <= set(pattern.cfg), (key, describe(outcome))


def assert_judged(outcome: dict) -> None:
    """Trusted, or (for a pattern that declares outputs unverifiable) untrusted for that alone."""
    if hp.BY_NAME[outcome["name"]].unverifiable:
        assert_declared(outcome)
    else:
        assert_trusted(outcome)


def assert_at_no_cost(outcome: dict) -> None:
    """The defences-on median within 5% of the defences-off one (launch-bound kernels:
    max(5%, 0.3 us))."""
    difference = abs(outcome["on_us"] - outcome["off_us"])
    assert difference <= allowed_difference_us(outcome["off_us"]), describe(outcome)


def assert_trusted_at_no_cost(outcome: dict) -> None:
    assert_trusted(outcome)
    assert_at_no_cost(outcome)


def assert_judged_at_no_cost(outcome: dict) -> None:
    assert_judged(outcome)
    assert_at_no_cost(outcome)


@pytest.mark.parametrize("name", hp.NAMES)
@pytest.mark.parametrize("round_", ROUNDS)
def test_honest_pattern_is_trusted_at_no_cost(gpu_client, round_, name):
    """Never refused; trusted with every output checked (a declaring pattern: untrusted for its
    declaration alone); the defences cost at most 5% (0.3 us)."""
    outcome = outcome_of(gpu_client, name, round_)
    record(
        f"honest_r{round_}_{name}",
        {
            "on_us": round(outcome["on_us"], 3) if "on_us" in outcome else None,
            "off_us": round(outcome["off_us"], 3) if "off_us" in outcome else None,
            "ratio": round(outcome["ratio"], 4) if "ratio" in outcome else None,
            "verdict": outcome["verdict"],
            "flags": outcome.get("flags", [])[:3],
            "conditions": outcome.get("conditions", [])[:3],
            "outputs_unchecked": outcome.get("outputs_unchecked", [])[:3],
            "throttle": outcome.get("throttle", []),
            "error": (outcome["error"] or {}).get("message", "")[:200] if outcome["error"] else None,
        },
    )
    assert_judged_at_no_cost(outcome)


@pytest.mark.parametrize("name", hp.NAMES)
def test_both_rounds_give_the_same_verdict(gpu_client, name):
    verdicts = [outcome_of(gpu_client, name, round_)["verdict"] for round_ in ROUNDS]
    expected = [expected_verdict(hp.BY_NAME[name])] * len(ROUNDS)
    assert verdicts == expected, (verdicts, [describe(OUTCOMES[(name, r)]) for r in ROUNDS])


@pytest.mark.parametrize("name", hp.NAMES)
def test_outputs_are_found_and_checked(gpu_client, name):
    """What the benchmark found to check: the argument outputs wherever they stand, the returned
    tensors, and nothing left unchecked but what the pattern declares unverifiable."""
    pattern = hp.BY_NAME[name]
    outcome = outcome_of(gpu_client, name, ROUNDS[0])
    assert outcome["status"] == "COMPLETED", describe(outcome)
    for key, timing in outcome["on"].items():
        integrity = timing["integrity"]
        if pattern.checked_outputs is not None:
            found = dig(integrity, "defences", "arguments", "checked_outputs")
            assert found == pattern.checked_outputs, (key, describe(outcome))
        if pattern.returned is not None:
            returned = dig(integrity, "defences", "returned", "checked")
            assert sorted(returned or []) == sorted(pattern.returned), (key, describe(outcome))
        if pattern.constants is not None:  # returned, never written: restored, never poisoned
            constants = dig(integrity, "defences", "returned", "constants")
            assert sorted(constants or []) == sorted(pattern.constants), (key, describe(outcome))
        if pattern.unverifiable:  # only its declarations, each named
            unchecked = integrity.get("outputs_unchecked") or []
            assert unchecked and all(u.startswith(DECLARED) for u in unchecked), (key, describe(outcome))
            assert all(any(d in u for u in unchecked) for d in pattern.unverifiable), (key, describe(outcome))
            continue
        assert integrity.get("outputs_unchecked") == [], (key, describe(outcome))
        # Something was checked: the found outputs or the returned tensors.
        checked = (dig(integrity, "defences", "arguments", "checked_outputs") or []) + (
            dig(integrity, "defences", "returned", "checked") or []
        )
        assert checked, (key, describe(outcome))


@pytest.mark.parametrize("name", [p.name for p in hp.PATTERNS if p.gate_timeouts is not None])
def test_launch_gate_times_out_only_for_calls_that_wait(gpu_client, name):
    """The launch gate with the defences on and off alike: a call that waits for the GPU inside
    (.item(), torch.cuda.synchronize()) times out once and stops the gate, said in `conditions`;
    any other call (a stream of its own that waits on the caller's included) runs gated throughout."""
    pattern = hp.BY_NAME[name]
    outcome = outcome_of(gpu_client, name, ROUNDS[0])
    assert outcome["status"] == "COMPLETED", describe(outcome)
    for key, timing in [*outcome["on"].items(), *outcome["off"].items()]:
        gate = dig(timing, "integrity", "defences", "launch_gate")
        assert isinstance(gate, dict) and gate.get("enabled") is True, (key, gate)
        assert gate.get("timeouts") == pattern.gate_timeouts, (key, gate, describe(outcome))
        noted = [c for c in timing["integrity"].get("conditions", []) if "launch gate" in c]
        if pattern.gate_timeouts:
            assert gate.get("gated_calls") == 1, (key, gate)  # the first timed call, then no gate
            assert any("timed out" in c for c in noted), (key, timing["integrity"].get("conditions"))
        else:
            assert gate.get("gated_calls") == timing["repeat"], (key, gate, timing["repeat"])
            assert noted == [], (key, noted)


def table(outcomes: dict) -> str:
    """The corpus as a markdown table, both rounds side by side (docs/benchmark-integrity.md)."""
    rows = [
        "| pattern | kind | on us | off us | on/off | verdict | outputs_unchecked |",
        "|---|---|---|---|---|---|---|",
    ]

    def both(name, key, form):
        values = [outcomes.get((name, r), {}).get(key) for r in ROUNDS]
        return " / ".join("-" if v is None else form.format(v) for v in values)

    for pattern in hp.PATTERNS:
        if not any((pattern.name, r) in outcomes for r in ROUNDS):
            continue
        unchecked = sorted(
            {u for r in ROUNDS for u in outcomes.get((pattern.name, r), {}).get("outputs_unchecked", [])}
        )
        rows.append(
            f"| {pattern.name} | {pattern.kind} | {both(pattern.name, 'on_us', '{:.2f}')} | "
            f"{both(pattern.name, 'off_us', '{:.2f}')} | {both(pattern.name, 'ratio', '{:.3f}')} | "
            f"{both(pattern.name, 'verdict', '{}')} | {'; '.join(unchecked) or '-'} |"
        )
    return "\n".join(rows)


def test_corpus_table():
    """Last: the figures of both rounds, for the closing note and the docs."""
    if not OUTCOMES:
        pytest.skip("no pattern ran in this session")
    text = table(OUTCOMES)
    print("\n" + text)
    record("honest_corpus_table", text)
    throttled = sorted({r for o in OUTCOMES.values() for r in o.get("throttle", [])})
    record("honest_corpus_throttle_reasons_seen", throttled)
    elapsed = sum(o["elapsed_s"] for o in OUTCOMES.values())
    slowest = sorted(OUTCOMES.items(), key=lambda item: -item[1]["elapsed_s"])[:5]
    record(
        "honest_corpus_elapsed_s",
        {
            "requests": len(OUTCOMES),
            "total": round(elapsed, 1),
            "slowest": {f"{n} r{r}": round(o["elapsed_s"], 1) for (n, r), o in slowest},
        },
    )
    if len(OUTCOMES) == len(hp.PATTERNS) * len(ROUNDS):  # the whole corpus, both rounds
        assert elapsed < BUDGET_S, f"the corpus took {elapsed:.0f} s of requests (budget: {BUDGET_S} s)"
