"""Helpers importable by uploaded code: `from kcoral.builtins import benchmark`.

Must import on any server, CPU ones included, with nothing but the standard
library (spec/protocol.md §7.5).
"""

import math
import os
import statistics
import time

from kcoral.errors import ExecutionError

__all__ = ["benchmark", "benchmark_paired", "compile_tirx"]

_DEFAULTS = {"warmup_ms": 25.0, "repeat_ms": 100.0, "flush_l2": True}
# Which timer runs is decided once, when the worker imports this module (before any upload),
# not by the environment at call time, which user code can change.
_DEVICE = os.environ.get("KCORAL_WORKER_DEVICE", "cpu")
_MAX_ITERATIONS = 1_000_000
_PERCENTILES = (5, 10, 25, 50, 75, 90, 95, 99)


def _split_cfg(rest: tuple) -> tuple[tuple, dict]:
    """The last positional argument is the config when it is a dict (spec benchmark.md §1.1)."""
    if rest and isinstance(rest[-1], dict):
        return rest[:-1], rest[-1]
    return rest, {}


def _cfg_count(cfg: dict, count_key: str, budget_key: str, minimum: int) -> tuple[int | None, float]:
    """(explicit count or None, budget in ms); the budget is only checked when it is used."""
    if cfg.get(count_key) is not None:
        value = cfg[count_key]
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ExecutionError("runtime", f"benchmark cfg {count_key!r} must be an integer >= {minimum}")
        return value, float(_DEFAULTS[budget_key])
    budget = cfg.get(budget_key, _DEFAULTS[budget_key])
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 <= budget < math.inf:
        raise ExecutionError("runtime", f"benchmark cfg {budget_key!r} must be a non-negative number")
    return None, float(budget)


def _count(cfg: dict, count_key: str, budget_key: str, estimate_ms: float, minimum: int) -> int:
    explicit, budget = _cfg_count(cfg, count_key, budget_key, minimum)
    if explicit is not None:
        return explicit
    if estimate_ms <= 0:
        return _MAX_ITERATIONS
    return max(minimum, min(_MAX_ITERATIONS, int(budget / estimate_ms)))


def _short(text: str, limit: int = 600) -> str:
    """Shortens a message to `limit` characters, keeping both ends (spec benchmark.md §1.6)."""
    if len(text) <= limit:
        return text
    marker = " ... "
    head = (limit - len(marker)) // 2
    return text[:head] + marker + text[-(limit - len(marker) - head):]


def summarize(samples_ms: list[float]) -> dict:
    """Statistics with spread, shared by every timer."""
    ordered = sorted(samples_ms)

    def percentile(p: float) -> float:
        # Linear interpolation between closest ranks.
        position = (len(ordered) - 1) * p / 100
        low = int(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    stats = {
        "latency_ms_median": statistics.median(ordered),
        "latency_ms_mean": statistics.fmean(ordered),
        "latency_ms_min": ordered[0],
        "latency_ms_max": ordered[-1],
        "latency_ms_std": statistics.pstdev(ordered) if len(ordered) > 1 else 0.0,
        "n_samples": len(ordered),
    }
    for p in _PERCENTILES:
        stats[f"latency_ms_p{p}"] = percentile(p)
    return stats


def _host_benchmark(fn, args: tuple, cfg: dict) -> dict:
    """Times host callables with the monotonic clock, one sample per call."""
    clock = time.perf_counter_ns
    fn(*args)  # one untimed call: first-use costs are not the kernel's
    start = clock()
    for _ in range(5):
        fn(*args)
    estimate_ms = (clock() - start) / 5e6
    warmup = _count(cfg, "warmup", "warmup_ms", estimate_ms, 0)
    repeat = _count(cfg, "repeat", "repeat_ms", estimate_ms, 1)
    for _ in range(warmup):
        fn(*args)
    samples = [0.0] * repeat
    for i in range(repeat):
        t0 = clock()
        fn(*args)
        samples[i] = (clock() - t0) / 1e6
    result = summarize(samples)
    # The host timer sees no device activities and flushes no cache.
    result.update(activities_stable=True, flush_l2=False, warmup=warmup, repeat=repeat, timer="host")
    return result


def benchmark(fn, *rest) -> dict:
    """benchmark(fn, *args, cfg?) -> latency statistics in milliseconds.

    cfg keys: warmup_ms (25), repeat_ms (100), warmup, repeat (counts that
    override the budgets), flush_l2 (True; GPU only), and on GPU servers
    outputs (indices of the output arguments; default: the last tensor
    argument of a call with two or more) and rotate_inputs (True): each call
    gets its tensors from a rotation of copies, outputs are poisoned before
    every call and checked against the first call's after timing. The result
    carries an `integrity` report, sealed in C++ and verified by the server
    (docs/benchmark-integrity.md).
    """
    if not callable(fn):
        raise ExecutionError("runtime", "benchmark expects a compiled module handle")
    args, cfg = _split_cfg(rest)
    if _DEVICE == "gpu":
        from kcoral._worker import gpu_benchmark

        return gpu_benchmark.benchmark(fn, args, cfg)
    if os.environ.get("KCORAL_CPU_EXECUTION", "host") != "host":
        raise ExecutionError("unavailable", "benchmark needs a GPU server (this CPU server runs in reference mode)")
    try:
        return _host_benchmark(fn, args, cfg)
    except ExecutionError:
        raise
    except Exception as exc:  # noqa: BLE001 - the callable failed
        from kcoral._worker.errors import safe_text, type_name  # the exception is user code's

        raise ExecutionError("runtime", _short(f"benchmark call failed: {type_name(exc)}: {safe_text(exc)}")) from exc


def benchmark_paired(candidate, reference, *rest) -> dict:
    """benchmark_paired(candidate, reference, *args, cfg?) -> a paired comparison (GPU only).

    Both run over the same arguments, interleaved call by call (ABBA), so
    drift and clocks fall on both alike. The result has the candidate's
    benchmark keys, "reference" with the reference's, ratio_median
    (candidate / reference) with ratio_ci95_low/high, speedup_median, and
    outputs_match_reference. cfg as for benchmark.
    """
    if not callable(candidate) or not callable(reference):
        raise ExecutionError("runtime", "benchmark_paired expects two compiled module handles")
    args, cfg = _split_cfg(rest)
    if _DEVICE != "gpu":
        raise ExecutionError("unavailable", "benchmark_paired needs a GPU server")
    from kcoral._worker import gpu_benchmark

    return gpu_benchmark.benchmark_paired(candidate, reference, args, cfg)


def compile_tirx(fn, bindings=None):
    """Compiles a TIRx kernel; needs Apache TVM on the server."""
    try:
        import tvm  # noqa: F401
    except ImportError:
        raise ExecutionError("unavailable", "compile_tirx needs Apache TVM on the server") from None
    raise ExecutionError("unavailable", "compile_tirx is not supported by this server yet")
