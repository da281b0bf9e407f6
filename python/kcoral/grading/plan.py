"""A grade's cfg, checked field by field before anything runs, as the plan its phases read."""

from __future__ import annotations

from typing import Any

from kcoral.grading.code import Code

# Keys the defended benchmarks take from cfg as they are (builtins.benchmark's documentation).
BENCHMARK_KEYS = ("warmup_ms", "repeat_ms", "warmup", "repeat", "flush_l2")
MAX_SHAPES = 8
MAX_SEEDS = 8
DEFAULT_SEEDS = 2  # the distributions rotate over shapes and seeds: all three show
DEFAULT_PLAUSIBLE_SPEEDUP = 10.0
# Both benchmarks' budgets unless cfg says otherwise: half the benchmark's own (25 ms, 100 ms),
# still hundreds of interleaved pairs for a kernel of tens of microseconds, and less lease.
GRADE_BENCHMARK = {"warmup_ms": 10, "repeat_ms": 50}
GRADE_KEYS = ("shapes", "seeds", "reference_dtype", "tolerance", "plausible_speedup")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _shapes(value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > MAX_SHAPES:
        raise ValueError(f"cfg['shapes'] must be a list of at most {MAX_SHAPES} dicts")
    for i, shape in enumerate(value):
        if not isinstance(shape, dict) or not shape:
            raise ValueError(f"cfg['shapes'][{i}] must be a non-empty dict of size names to numbers")
        for key, size in shape.items():
            if not isinstance(key, str) or not key.isidentifier() or not _number(size):
                raise ValueError(f"cfg['shapes'][{i}][{key!r}] must map a name to a number, got {size!r}")
    return [dict(shape) for shape in value]


def make_plan(cfg: dict | None, candidate: Code, reference: Code, make_inputs: Code) -> dict[str, Any]:
    """The plan every phase gets; a ValueError or TypeError names the bad field."""
    for name, code in (("candidate", candidate), ("reference", reference), ("make_inputs", make_inputs)):
        if not isinstance(code, Code):
            raise TypeError(f"grade's {name} must be a kcoral.grading.Code, not {type(code).__name__}")
    if make_inputs.factory:
        raise ValueError("make_inputs is called as make_inputs(seed, shape): it cannot be a factory")
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(GRADE_KEYS) - set(BENCHMARK_KEYS))
    if unknown:
        raise ValueError(f"unknown cfg key {unknown[0]!r}; grade takes {', '.join(GRADE_KEYS + BENCHMARK_KEYS)}")
    plan: dict[str, Any] = {
        "shapes": _shapes(cfg.get("shapes", [])),
        "seeds": cfg.get("seeds", DEFAULT_SEEDS),
        "candidate_factory": candidate.factory,
        "reference_factory": reference.factory,
        "plausible_speedup": cfg.get("plausible_speedup", DEFAULT_PLAUSIBLE_SPEEDUP),
        "benchmark": {**GRADE_BENCHMARK, **{key: cfg[key] for key in BENCHMARK_KEYS if key in cfg}},
    }
    if not isinstance(plan["seeds"], int) or isinstance(plan["seeds"], bool) or not 1 <= plan["seeds"] <= MAX_SEEDS:
        raise ValueError(f"cfg['seeds'] must be an int from 1 to {MAX_SEEDS} (input sets per shape)")
    if not _number(plan["plausible_speedup"]) or plan["plausible_speedup"] <= 1:
        raise ValueError("cfg['plausible_speedup'] must be a number above 1")
    if "reference_dtype" in cfg:
        if cfg["reference_dtype"] != "float64":
            raise ValueError(f"cfg['reference_dtype'] can only be 'float64', got {cfg['reference_dtype']!r}")
        plan["reference_dtype"] = "float64"
    if "tolerance" in cfg:
        tolerance = cfg["tolerance"]
        if not isinstance(tolerance, dict) or set(tolerance) != {"rtol", "atol"}:
            raise ValueError("cfg['tolerance'] must be {'rtol': number, 'atol': number}")
        if not all(_number(v) and v >= 0 for v in tolerance.values()):
            raise ValueError("cfg['tolerance'] values must be numbers of at least 0")
        plan["tolerance"] = {"rtol": float(tolerance["rtol"]), "atol": float(tolerance["atol"])}
    return plan
