"""Outcomes of the compile, evaluate and run programs as answers an agent can act on: plain JSON
(no bytes, no arrays), the numbers it decides with first, and for a failed step the field of the
tool call it came from and what to change."""

from __future__ import annotations

import hashlib
from typing import Any

from kcoral.result import ProgramResult

from .tool_errors import tool_error

_SHOWN_VALUES = 16

# evaluate's instruction ids (programs.py) -> the argument at fault and the fix.
_EVALUATE_STEPS = {
    "library": ("library", "the server refused the library's bytes: compile it again"),
    "module": ("module", "the candidate module does not import: fix its Python source"),
    "function": ("function", "no such function in the candidate: name one the library or module exports"),
    "reference": ("reference", "the reference does not import: fix its Python source"),
    "reference_function": ("reference_function", "name the function the reference source defines"),
    "expected": ("reference", "the reference raised: fix it (it gets the inputs as numpy arrays)"),
    "candidate_call": (
        "function",
        "the candidate raised when called as function(*inputs, *outputs): check its signature",
    ),
    "correctness": ("outputs", "the outputs could not be compared with the reference: check shapes and dtypes"),
    "benchmark_call": ("function", "the benchmark refused or failed; its reason is quoted in error"),
}


def lease(result: ProgramResult) -> dict[str, Any]:
    """What the request held: GPUs (none on a CPU server), and for how long it waited and held them."""
    return {
        "gpu_ids": list(result.gpu_ids),
        "lease_wait_ms": result.lease_wait_ms,
        "lease_held_ms": result.lease_held_ms,
        "queue_ms": result.queue_ms,
        "elapsed_ms": result.elapsed_ms,
        "timing_spans": result.timing_spans,
        "request_id": result.request_id,
    }


def failed_step(result: ProgramResult, steps: dict[str, tuple[str, str]] | None = None) -> Exception:
    """A FAILED outcome as a tool error naming the instruction, its field and the fix."""
    error = result.error or {}
    step = error.get("instruction_id")
    field, fix = (steps or {}).get(step, (None, "see error and traceback"))
    return tool_error(
        f"step {step!r} failed ({error.get('kind')}): {error.get('message')}",
        field=field,
        fix=fix,
        kind=error.get("kind"),
        instruction_index=error.get("instruction_index"),
        traceback=(error.get("traceback") or "")[-3000:] or None,
        stdout=result.stdout[-2000:] or None,
        stderr=result.stderr[-2000:] or None,
        request_id=result.request_id,
    )


def evaluate_failure(result: ProgramResult) -> Exception:
    return failed_step(result, _EVALUATE_STEPS)


def _reasons(integrity: dict[str, Any]) -> list[str]:
    """Why a benchmark is not trusted, in words: its flags and conditions, or what is missing."""
    reasons = []
    for item in [*integrity.get("flags", []), *integrity.get("conditions", [])]:
        if isinstance(item, dict):
            reasons.append(str(item.get("reason") or item.get("message") or item.get("name") or item))
        else:
            reasons.append(str(item))
    if integrity.get("outputs_unchecked"):
        reasons.append(f"outputs not checked: {integrity['outputs_unchecked']}")
    if integrity.get("verified") is False:
        reasons.append("the server could not verify the result's seal")
    if not reasons and not integrity.get("trusted"):
        reasons.append("not trusted, with no flag given: see integrity")
    return reasons


def timing_summary(timing: dict[str, Any]) -> dict[str, Any]:
    median = timing.get("latency_ms_median")
    p10, p90 = timing.get("latency_ms_p10"), timing.get("latency_ms_p90")
    return {
        "median_ms": median,
        "p10_ms": p10,
        "p90_ms": p90,
        "p25_ms": timing.get("latency_ms_p25"),
        "p75_ms": timing.get("latency_ms_p75"),
        "min_ms": timing.get("latency_ms_min"),
        "std_ms": timing.get("latency_ms_std"),
        # (p90 - p10) / median: how far one run's number can be trusted against another's.
        "spread": (p90 - p10) / median if median and p10 is not None and p90 is not None else None,
        "samples": timing.get("n_samples"),
        "timer": timing.get("timer"),
    }


def evaluate_answer(result: ProgramResult) -> dict[str, Any]:
    correctness = dict(result.results["correctness"])
    timing = result.results["timing"]
    integrity = timing.get("integrity") or {}
    return {
        "correct": bool(correctness.get("passed")),
        "correctness": correctness,
        "timing": timing_summary(timing),
        "integrity": {
            "trusted": bool(integrity.get("trusted")),
            "reasons": _reasons(integrity),
            "verified": integrity.get("verified"),
            "flags": integrity.get("flags", []),
            "conditions": integrity.get("conditions", []),
            "scope": integrity.get("scope"),
        },
        "lease": lease(result),
    }


def plain(value: Any) -> Any:
    """A returned value as JSON: bytes by size and hash, arrays by dtype, shape and first values."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        flat = value.reshape(-1)
        return {
            "dtype": str(value.dtype),
            "shape": list(value.shape),
            "values": flat[:_SHOWN_VALUES].tolist(),
            "truncated": flat.size > _SHOWN_VALUES,
        }
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    path = getattr(value, "path", None)
    return {"type": type(value).__name__, "path": path} if path else repr(value)


def run_answer(result: ProgramResult) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "status": result.status,
        "results": plain(result.results),
        "stdout": result.stdout,
        "stderr": result.stderr,
        "lease": lease(result),
    }
    if result.error:
        answer["error"] = result.error
    return answer
