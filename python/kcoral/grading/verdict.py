"""A grade's verdict from its three programs' results (docs/grading.md, "The verdict").

`correct` comes from the judge alone, a process that ran no candidate code. `trusted` also needs
both defended benchmarks verified and trusted, and the reference's time beside the candidate
(the paired benchmark, in the candidate's process) to agree with its time alone (the judge's):
a candidate that slows or fakes the reference in its own process to inflate its speedup is
caught by that disagreement."""

from __future__ import annotations

from typing import Any

from kcoral.result import ProgramResult

# The reference's median beside the candidate may differ from its median alone by this share and
# this many microseconds before the verdict says so (two processes, the same GPU, minutes apart).
REFERENCE_AGREEMENT = 0.20
REFERENCE_AGREEMENT_US = 3.0
MIN_EXTRA_SHAPES = 3


PHASES = ("inputs", "candidate", "judge")


def _lease_ms(results: list[ProgramResult]) -> float:
    return round(sum(r.lease_held_ms for r in results), 3)


def _base(plan: dict[str, Any], results: list[ProgramResult]) -> dict[str, Any]:
    out = empty_verdict(1 + len(plan["shapes"]), _lease_ms(results))
    out["lease_ms_by_phase"] = {phase: round(r.lease_held_ms, 3) for phase, r in zip(PHASES, results)}
    return out


def empty_verdict(shapes_used: int, lease_ms: float | None) -> dict[str, Any]:
    """A verdict with nothing judged yet: not correct, not trusted, no speedup."""
    return {
        "correct": False,
        "per_input": [],
        "shapes_used": shapes_used,
        "speedup": None,
        "speedup_ci95_low": None,
        "speedup_ci95_high": None,
        "significant": False,
        "trusted": False,
        "reasons": [],
        "conditions": [],
        "integrity": {"candidate": None, "reference": None},
        "lease_ms": lease_ms,
        "lease_ms_by_phase": {},
        "error": None,
    }


def failed_verdict(phase: str, failed: ProgramResult, results: list[ProgramResult], plan: dict[str, Any]) -> dict:
    """A phase's program failed: the grader's code (inputs, judge) or the candidate's."""
    error = failed.error or {}
    whose = {"inputs": "make_inputs or the reference", "candidate": "the candidate", "judge": "the reference"}[phase]
    out = _base(plan, results)
    out["error"] = {"phase": phase, "kind": error.get("kind", "runtime"), "message": error.get("message", "")}
    out["reasons"] = [f"{whose} failed ({out['error']['kind']}): {out['error']['message']}"[:600]]
    return out


def _shape_text(shape: dict[str, Any] | None) -> str:
    return "the declared shape" if shape is None else "shape " + ", ".join(f"{k}={v}" for k, v in shape.items())


def _integrity(timing: dict[str, Any] | None) -> dict[str, Any] | None:
    return timing.get("integrity") if isinstance(timing, dict) else None


def _trusted(timing: dict[str, Any] | None) -> bool:
    integrity = _integrity(timing) or {}
    return bool(integrity.get("verified")) and bool(integrity.get("trusted"))


def _timing_reasons(who: str, timing: dict[str, Any]) -> list[str]:
    if "error" in timing:
        return [f"{who} benchmark failed ({timing['error']['kind']}): {timing['error']['message']}"[:600]]
    integrity = timing.get("integrity") or {}
    if not integrity.get("verified"):
        return [f"{who} benchmark's seal did not verify"]
    if integrity.get("trusted"):
        return []
    found = list(integrity.get("flags", [])) + [f"unchecked: {u}" for u in integrity.get("outputs_unchecked", [])]
    return [f"{who} benchmark is not trusted: " + ("; ".join(found) or "no reason given")[:600]]


def verdict(inputs: ProgramResult, answered: ProgramResult, judged: ProgramResult, plan: dict[str, Any]) -> dict:
    out = _base(plan, [inputs, answered, judged])
    judgement = judged.results["judgement"]
    paired = answered.results["answer"]["timing"]
    alone = judgement["reference_timing"]
    out["per_input"] = judgement["per_input"]
    out["integrity"] = {"candidate": _integrity(paired), "reference": _integrity(alone)}
    reasons, conditions = out["reasons"], out["conditions"]

    wrong = [row for row in out["per_input"] if not row["correct"]]
    out["correct"] = bool(out["per_input"]) and not wrong
    for row in wrong:
        reasons.append(
            f"wrong on {_shape_text(row['shape'])} (seed {row['seed_index']}, {row['distribution']} values): "
            + row.get("why", "outputs beyond tolerance")
        )
    reasons += _timing_reasons("the candidate's", paired) + _timing_reasons("the reference's", alone)

    if "error" not in paired:
        low, high = paired["ratio_ci95_low"], paired["ratio_ci95_high"]
        out["speedup"] = paired["speedup_median"]
        out["speedup_ci95_low"] = 1.0 / high if high else None
        out["speedup_ci95_high"] = 1.0 / low if low else None
        out["significant"] = high < 1.0 or low > 1.0
        if paired.get("outputs_match_reference") is False:
            reasons.append("in the candidate's process its timed outputs differ from the reference's")
        beside_us = paired["reference"]["latency_ms_median"] * 1e3
        if "error" not in alone:
            alone_us = alone["latency_ms_median"] * 1e3
            if abs(beside_us - alone_us) > max(REFERENCE_AGREEMENT * alone_us, REFERENCE_AGREEMENT_US):
                reasons.append(
                    f"the reference took {beside_us:.1f} us beside the candidate and {alone_us:.1f} us alone: "
                    "the speedup is not the candidate's"
                )
        if out["speedup"] > plan["plausible_speedup"]:
            conditions.append(
                f"a speedup of {out['speedup']:.1f}x is past the plausibility bound of "
                f"{plan['plausible_speedup']:g}x: worth a look (not a failure)"
            )
    unusable = inputs.results["inputs"]["unusable"]
    if unusable:
        conditions.append(
            f"{len(unusable)} drawn input sets were unusable (the reference gave non-finite values) and drawn again"
        )
    if len(plan["shapes"]) < MIN_EXTRA_SHAPES:
        conditions.append(f"graded on {len(plan['shapes'])} shapes beyond the declared one (3 or more recommended)")
    out["trusted"] = out["correct"] and not reasons and _trusted(paired) and _trusted(alone)
    return out
